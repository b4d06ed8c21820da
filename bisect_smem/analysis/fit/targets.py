"""Would a launch fit? A kernel's shared memory against each architecture's published limits, the local
devices' measured ones, or those a saved report or baseline recorded: without opt-in, with opt-in, or
not at all, by how many bytes, and how many such blocks fit on one SM."""

from __future__ import annotations

import dataclasses
from typing import Any

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_THREADS_PER_BLOCK,
    STATIC_SMEM_COMPILE_CAP_BYTES,
    block_footprint,
    block_request_bytes,
    blocks_per_sm,
    default_reserved_bytes,
    static_footprint,
)
from bisect_smem.core.profiles import ArchProfile, cc_text

# Far above any GPU's shared memory, and small enough that every byte count printed is an ordinary integer.
MAX_FIT_BYTES = 1 << 32
UNKNOWN, DOES_NOT_FIT, DOES_NOT_BUILD = "unknown", "does not fit", "does not build"


def check_bound(value: int, what: str) -> int:
    """``value`` itself, or a UsageError when it is beyond MAX_FIT_BYTES (a typo, not a kernel)."""
    if value > MAX_FIT_BYTES:
        raise UsageError(f"{what} must be <= {MAX_FIT_BYTES} B (4 GiB; got {value})")
    return value


def check_limits(where: str, positive: dict[str, Any], non_negative: dict[str, Any]) -> None:
    """Refuse (UsageError naming the field and value) a limit no device can have: not a whole number,
    not positive (or negative for ``non_negative``), or beyond MAX_FIT_BYTES. None means not known."""
    for fields, low in ((positive, 1), (non_negative, 0)):
        for name, value in fields.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_FIT_BYTES:
                raise UsageError(f"{where}: {name} {value!r} is not a value a device can have "
                                 f"(expected a whole number in {low}..{MAX_FIT_BYTES})")
    optin, default = positive.get("opt-in limit"), positive.get("default limit")
    if optin is not None and default is not None and optin < default:
        raise UsageError(f"{where}: an opt-in limit of {optin} B below the default limit of {default} B is not a "
                         "value a device can have")


@frozen
class FitRequest:
    """The kernel: its dynamic and static shared memory (bytes) and its block size."""

    dynamic_bytes: int
    static_bytes: int = 0
    threads: int = 128
    source: str = ""

    def __post_init__(self) -> None:
        if self.dynamic_bytes < 0:
            raise UsageError(f"dynamic bytes must be >= 0 (got {self.dynamic_bytes})")
        check_bound(self.dynamic_bytes, "dynamic bytes")
        if not 0 <= self.static_bytes <= STATIC_SMEM_COMPILE_CAP_BYTES:
            raise UsageError(f"static bytes must be in 0..{STATIC_SMEM_COMPILE_CAP_BYTES}, the compile-time cap "
                             f"(got {self.static_bytes})")
        if not 1 <= self.threads <= MAX_THREADS_PER_BLOCK:
            raise UsageError(f"threads must be in 1..{MAX_THREADS_PER_BLOCK} (got {self.threads})")

    @property
    def static_footprint_bytes(self) -> int:
        """How far the static data pushes the dynamic array: rounded up to 16 B."""
        return static_footprint(self.static_bytes)

    @property
    def total_bytes(self) -> int:
        """What the block asks for: the dynamic bytes behind the 16-byte aligned static data."""
        return block_request_bytes(self.dynamic_bytes, self.static_bytes)


@frozen
class Target:
    """Limits to fit against, published for an architecture or measured on a device.

    ``error`` says why a measured device has no limit; ``source`` names the file it was read from.
    """

    name: str
    kind: str  # "published" or "measured"
    default_limit_bytes: int | None
    optin_limit_bytes: int | None
    smem_per_sm_bytes: int | None
    reserved_bytes: int
    granule_bytes: int
    max_blocks_per_sm: int | None
    max_threads_per_sm: int | None
    compute_capability: tuple[int, int] | None = None
    driver_version: str | None = None
    error: str | None = None
    source: str | None = None
    short: str | None = None  # how an answer line names it: "sm_120", "device 0", a model and its driver

    def __post_init__(self) -> None:
        check_limits(self.name, {"default limit": self.default_limit_bytes, "opt-in limit": self.optin_limit_bytes,
                                 "shared memory per SM": self.smem_per_sm_bytes,
                                 "allocation granularity": self.granule_bytes,
                                 "max blocks per SM": self.max_blocks_per_sm,
                                 "max threads per SM": self.max_threads_per_sm},
                     {"reserved bytes": self.reserved_bytes})

    @classmethod
    def from_profile(cls, p: ArchProfile) -> Target:
        """The published row of an architecture."""
        reserved = p.reserved_smem_per_block_bytes
        if reserved is None:
            reserved = default_reserved_bytes(p.compute_capability)
        return cls(f"{p.key} ({p.example_parts})", "published", DEFAULT_SMEM_PER_BLOCK_BYTES,
                   p.max_smem_per_block_optin_bytes, p.smem_per_sm_bytes, reserved, p.allocation_granularity_bytes,
                   p.max_blocks_per_sm, p.max_threads_per_sm, p.compute_capability, short=p.key)


def target_record(target: Target) -> dict[str, Any]:
    """``target`` as JSON: what ``target_from_record`` reads back."""
    return {f.name: (list(v) if isinstance(v := getattr(target, f.name), tuple) else v) for f in dataclasses.fields(Target)}


def target_from_record(data: Any, where: str) -> Target:
    """A Target written by ``target_record``; a UsageError naming ``where`` for anything else."""
    names = {f.name for f in dataclasses.fields(Target)}
    if not isinstance(data, dict) or set(data) != names:
        raise UsageError(f"{where}: not a record of limits (expected the fields {', '.join(sorted(names))})")
    texts = ("name", "kind", "driver_version", "error", "source", "short")
    if data["kind"] not in ("measured", "published") or any(
            data[n] is not None and not isinstance(data[n], str) for n in texts) or not isinstance(data["name"], str):
        raise UsageError(f"{where}: kind, name and the labels of a record of limits are strings "
                         "(kind 'measured' or 'published')")
    cc = data["compute_capability"]
    if cc is not None and (not isinstance(cc, list) or len(cc) != 2 or
                           not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 100 for v in cc)):
        raise UsageError(f"{where}: compute_capability {cc!r} is not [major, minor]")
    if data["reserved_bytes"] is None or data["granule_bytes"] is None:
        raise UsageError(f"{where}: reserved_bytes and granule_bytes of a record of limits are whole numbers")
    try:
        return Target(**{**data, "compute_capability": tuple(cc) if cc else None})
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None


@frozen
class Labels:
    """A library's own words for what fit shows of its kernel, so that one renderer speaks each library's:
    a ``{}`` in a template is a stage count. The defaults are plain words any library may keep."""

    stages: str = "stages"  # the stage count, as a table's column is headed
    count: str = "{} stages"  # a stage count in a sentence
    fits: str = "{} stages fit"
    does_not_fit: str = "{} stages do not fit"
    no_count: str = "no stage count"  # where the rule gives none
    fixed: str = "{} stages"  # how a user fixes the count in the library's code
    launch: str = "shared memory"  # what the launch asks for, as a table's column is headed
    launch_in_full: str = "the launch's shared memory"  # ... and as the breakdown names it
    # How the launch's bytes come about: a template over the result's fields and its details.
    derivation: str = "{stage_rule}"
    over: str = ""  # what the library raises when the launch is over the limit (none: a full stop)
    overflow: str = ""  # what happens where the library's automatic count overflows its own capacity
    size: str | None = None  # what a byte count of this library's kernel is, for --explain BYTES
    columns: tuple[tuple[str, str], ...] = ()  # (column head, details key): the rule's own table columns
    variants: tuple[tuple[str, str], ...] = ()  # (name, details key): another build that fits where this does not


@frozen
class FitResult:
    """One kernel against one target. The kernel's fields are None unless a library's tile was given;
    ``labels`` are its library's words for them, ``details`` the rule's own fields."""

    target: str
    kind: str
    verdict: str  # "fits without opt-in", "fits with opt-in", "does not fit", "does not build", "unknown"
    total_bytes: int
    optin_limit_bytes: int | None
    over_bytes: int | None  # total - opt-in limit: negative means bytes to spare
    blocks_per_sm: int | None
    error: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    source: str | None = None
    target_short: str | None = None  # the target as an answer line names it
    dynamic_bytes: int | None = None
    library: str | None = None  # whose kernel: the rule's library, as a person names it
    version: str | None = None  # the library's release whose arithmetic counted it
    tile: str | None = None
    stages: int | None = None
    stages_requested: int | str | None = None  # a number, or "auto"
    stage_rule: str | None = None
    stage_bytes: int | None = None
    builds: bool | None = None  # False: the library refuses to build the kernel (build_reason says why)
    build_reason: str | None = None
    mainloop_bytes: int | None = None
    epilogue_bytes: int | None = None
    launch_bytes: int | None = None  # what the launch asks for, as the library counts it (labels.launch)
    next_stage_bytes: int | None = None  # what one more stage would ask for
    parts: list[list[Any]] | None = None  # [name, bytes]: where every byte of the launch goes
    auto_rule_overflows: bool | None = None  # the library's automatic stage count gave more than its own capacity
    fitting_stages: int | None = None  # where the build does not fit: the most stages that do
    fitting_bytes: int | None = None  # what those stages ask for
    labels: Labels | None = None
    details: dict[str, Any] | None = None  # the rule's own fields (labels.columns and labels.variants name some)
    # Without --tile, where a rule lists every kernel a launcher builds: the fields that tell this one from
    # the others (the rule's candidate_fields, in its order).
    listed_as: dict[str, str] | None = None
    notes: tuple[str, ...] = ()  # what the rule adds to the answer (a launcher kernel that no build of it has)


def evaluate(request: FitRequest, target: Target) -> FitResult:
    """Does ``request`` fit ``target``, with or without opt-in, and how many such blocks share an SM."""
    total = request.total_bytes
    cc = cc_text(target.compute_capability) if target.compute_capability else None
    about = {"compute_capability": cc, "driver_version": target.driver_version, "source": target.source,
             "target_short": target.short or target.name, "dynamic_bytes": request.dynamic_bytes}
    if target.optin_limit_bytes is None:
        return FitResult(target.name, target.kind, UNKNOWN, total, None, None, None, error=target.error, **about)
    over = total - target.optin_limit_bytes
    if target.default_limit_bytes is not None and total <= target.default_limit_bytes:
        verdict = "fits without opt-in"
    elif over <= 0:
        verdict = "fits with opt-in"
    else:
        verdict = DOES_NOT_FIT
    blocks = None
    if verdict != DOES_NOT_FIT:
        footprint = block_footprint(total, target.granule_bytes, target.reserved_bytes)
        blocks, _ = blocks_per_sm(footprint, request.threads, target.smem_per_sm_bytes, target.max_blocks_per_sm,
                                  target.max_threads_per_sm)
    return FitResult(target.name, target.kind, verdict, total, target.optin_limit_bytes, over, blocks, **about)
