"""Verdict rows as data: what each row is about (its family and parameters), its verdict and kind, and its
notes as a tuple, so that whatever shows a row groups, folds and shortens it without reading its text.

``quantity`` and ``note`` are the row's name and explanation as reports have always spelled them (the
JSON keeps both); a row built with ``notes`` has ``note`` made from them, so the two cannot disagree.
A row read back from a report written before families existed has the family OTHER and no notes.
"""

from __future__ import annotations

import enum

from bisect_smem.core.frozen import frozen


class Conclusion(enum.StrEnum):
    """A row's verdict, spelled as reports have always spelled it (a failing word in capitals)."""

    MATCH = "match"
    MISMATCH = "MISMATCH"  # fails the run
    DIFFERS = "differs"  # the device did better than a prediction or a hint: fails only with --strict
    INFO = "info"  # nothing to compare
    ERROR = "ERROR"  # not measured, or measured by a search that cannot be trusted


class VerdictKind(enum.StrEnum):
    """What a row compares against."""

    LIMIT = "limit"  # a launch contract: any difference fails
    PREDICTION = "prediction"  # an occupancy API count the device may beat (``differs``) but not fall short of
    REFERENCE = "reference"  # the published table


VERDICTS = tuple(Conclusion)
VERDICT_KINDS = tuple(VerdictKind)


class Family(enum.StrEnum):
    """What a row compares."""

    SOURCES = "sources"  # one attribute as two sources report it
    DEFAULT_CEILING = "default_ceiling"
    AVAILABLE_API = "available_api"  # cuOccupancyAvailableDynamicSMemPerBlock beside a ceiling
    ATTRIBUTE_ACCEPT = "attribute_accept"
    SPLIT_CEILING = "split_ceiling"  # the opt-in ceiling beside static data
    OVERSIZED = "oversized"
    RESERVED = "reserved"
    GRANULARITY = "granularity"
    DYNAMIC_REGISTER = "dynamic_register"  # %dynamic_smem_size at the opt-in ceiling
    RESIDENCY = "residency"  # a plateau of the staircase
    SMEM_PER_SM = "smem_per_sm"
    CARVEOUT = "carveout"  # consecutive carveout settings that behave alike
    CARVEOUT_SIZES = "carveout_sizes"
    CLUSTERS_SKIPPED = "clusters_skipped"
    CLUSTER_LARGEST = "cluster_largest"
    CLUSTER_ACTIVE = "cluster_active"  # co-resident clusters
    CLUSTER_DSM = "cluster_dsm"  # distributed shared memory read back
    PUBLISHED_SMEM_PER_SM = "published_smem_per_sm"  # the published row's fields
    PUBLISHED_OPTIN = "published_optin"
    PUBLISHED_RESERVED = "published_reserved"
    NOT_PUBLISHED = "not_published"  # the cc has no published row
    MARCH_COVERAGE = "march_coverage"
    MARCH = "march"  # the march test: one SM that failed, or all passed
    GRANULE_SWEEP = "granule_sweep"
    OVER_CEILING = "over_ceiling"  # the ceiling + 1 B must fail
    LEFTOVERS = "leftovers"
    STEP = "step"  # a step that failed or was never run
    CROSS_CHECK = "cross_check"  # two backends on one quantity
    OTHER = "other"  # read back from a report that names no family (or one this version does not know)

    @classmethod
    def _missing_(cls, value: object) -> Family:
        return cls.OTHER


class NoteKind(enum.StrEnum):
    """Where a note belongs: every rendering, or only the full one."""

    REMARK = "remark"  # shown everywhere
    PROBES = "probes"  # how many probes the search took and its bound: the full table and the JSON
    BEYOND_PREDICTION = "beyond_prediction"  # by how much the device beat a prediction: the columns show it

    @classmethod
    def _missing_(cls, value: object) -> NoteKind:
        return cls.REMARK


@frozen
class Note:
    """One part of a row's note; ``short`` is what a compact table shows instead (None: the text)."""

    text: str
    kind: NoteKind = NoteKind.REMARK
    short: str | None = None


@frozen
class RowParameters:
    """What tells a row from the others of its family (None where it does not apply). Bytes, threads,
    blocks, percent."""

    threads: int | None = None
    static_bytes: int | None = None
    dynamic_bytes: int | None = None
    cluster_size: int | None = None
    percent: int | None = None
    last_percent: int | None = None  # a carveout row's settings run from ``percent`` to this


NO_PARAMETERS = RowParameters()


@frozen
class Verdict:
    """One row of the comparison: a quantity, what was reported (and by whom), what was measured."""

    quantity: str
    reported: int | str | None
    source: str | None
    measured: int | str | None
    verdict: Conclusion
    note: str = ""
    kind: VerdictKind = VerdictKind.LIMIT
    family: Family = Family.OTHER
    parameters: RowParameters = NO_PARAMETERS
    notes: tuple[Note, ...] = ()
    probes: int | None = None  # the search's probes, where a search found the measured value
    probe_bound: int | None = None
    # Where reported and measured are lists (their text joins the items with ", "), the items.
    reported_items: tuple[str, ...] = ()
    measured_items: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)} (got {self.verdict!r})")
        if self.kind not in VERDICT_KINDS:
            raise ValueError(f"verdict kind must be one of {', '.join(VERDICT_KINDS)} (got {self.kind!r})")
        # A word given as text (a row read back, a caller's string) is held as its member.
        object.__setattr__(self, "verdict", Conclusion(self.verdict))
        object.__setattr__(self, "kind", VerdictKind(self.kind))
        if self.notes and self.note != join_notes(self.notes):
            raise ValueError(f"a row's note is its notes joined (got {self.note!r} beside {self.notes!r})")


def join_notes(notes: tuple[Note, ...]) -> str:
    """The notes as one line, as a report's ``note`` has always read."""
    return "; ".join(n.text for n in notes)
