"""Validation levels, as operators know them from diagnostics: quick, standard, full.

quick: the limits only (default, attribute-accept and opt-in ceilings, reserved bytes, granularity),
for a boot-time check. standard: every ceiling, residency, carveout and clusters. full: standard plus
the shared memory itself (every SM, every byte; every granule; nothing left behind).
A quantity belongs to the lowest level that measures it (its declaration in core/quantities.py says
which); two runs compare at the lower of their levels.

The reference split (no static data, REFERENCE_THREADS threads) is the opt-in ceiling: quick measures
it, and residency, carveout, clusters and validation build on it. Its names are built here, once, as is
the block size of the residency staircase, which a replayed report's staircase is read by.
"""

from __future__ import annotations

LEVELS = ("quick", "standard", "full")
DEFAULT_LEVEL = "standard"
# How many times the search sees the ceiling and ceiling + 1 each; declared here, beside the level, so that
# the parser offers both without loading the search.
DEFAULT_CONFIRM = 2
MAX_CONFIRM = 32  # more repeats say nothing new, and each costs two probes per round of every search
REFERENCE_STATIC_BYTES = 0
REFERENCE_THREADS = 128  # the block size of the reference opt-in ceiling that later steps build on
STAIRCASE_THREADS = 32  # small blocks, so that the block limit and shared memory bind, not threads
FULL_PREFIX = "measured.validation."


def is_reference_split(static_bytes: int, threads: int) -> bool:
    """True for the split whose ceiling is the opt-in ceiling."""
    return static_bytes == REFERENCE_STATIC_BYTES and threads == REFERENCE_THREADS


def split_search_name(static_bytes: int, threads: int) -> str:
    """The name of a static split's ceiling search (a key of ``Measured.searches``)."""
    return f"optin_dynamic_ceiling/static={static_bytes}/threads={threads}"


def split_quantity_prefix(static_bytes: int, threads: int) -> str:
    """The prefix of a static split's quantities (keys of quantities.quantities), without the final dot."""
    return f"measured.static_split.static={static_bytes}.threads={threads}"


REFERENCE_SPLIT_PREFIX = split_quantity_prefix(REFERENCE_STATIC_BYTES, REFERENCE_THREADS) + "."


def level_rank(level: str) -> int:
    """0 for quick, 1 for standard, 2 for full; anything else is a ValueError naming the levels."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)} (got {level!r})")
    return LEVELS.index(level)


def common_level(a: str, b: str) -> str:
    """The level both runs reached: the lower of the two."""
    return a if level_rank(a) <= level_rank(b) else b
