"""The results: frozen dataclasses with units in their field names, and their JSON form.

``REPORT_SCHEMA`` names the JSON layout of a report, ``BASELINE_SCHEMA`` that of a baseline (one device of a
report plus provenance); fields are only ever added within one schema version.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import field
from typing import Any

from bisect_smem.core.attributes import DeviceContext, ReportedAttributes
from bisect_smem.core.frozen import frozen
from bisect_smem.core.integrity import GranuleSweep, Leftovers, MarchResult
from bisect_smem.core.jsonable import to_jsonable
from bisect_smem.core.levels import DEFAULT_LEVEL
from bisect_smem.core.rows import Conclusion, Verdict
from bisect_smem.core.status import DeviceSummary

REPORT_SCHEMA = "bisect_smem/report/v1"
BASELINE_SCHEMA = "bisect_smem/baseline/v1"


@frozen
class Ceiling:
    """One searched ceiling, with how it was found."""

    ceiling_bytes: int | None
    probes: int
    probe_bound: int
    at_cap: bool = False
    unstable_range_bytes: tuple[int, int] | None = None
    non_monotone_at_bytes: tuple[int, ...] = ()
    error: str | None = None
    rounds: int | None = None  # synchronisations the search took (several probes may share one)
    api_available_dynamic_bytes: int | None = None  # cuOccupancyAvailableDynamicSMemPerBlock, 1 block/SM


@frozen
class StaticSplit:
    """The opt-in dynamic ceiling of a kernel with ``static_bytes`` of static shared memory."""

    static_bytes: int
    threads: int
    dynamic_ceiling_bytes: int | None
    probes: int
    static_footprint_bytes: int | None = None  # how far the static data pushes the dynamic array
    # cuOccupancyAvailableDynamicSMemPerBlock at one block per SM, asked after opt-in to the ceiling
    api_available_dynamic_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.static_bytes < 0:
            raise ValueError(f"static bytes must be >= 0 (got {self.static_bytes})")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1 (got {self.threads})")


@frozen
class ResidencyStep:
    """One plateau of the residency staircase: from ``dynamic_bytes`` on, this many blocks per SM."""

    dynamic_bytes: int
    threads: int
    blocks_per_sm_min: int
    blocks_per_sm_max: int
    api_blocks_per_sm: int | None = None
    formula_blocks_per_sm: int | None = None
    limited_by: str | None = None


@frozen
class CarveoutPoint:
    """Residency under one carveout preference, and the carveout size it implies."""

    percent: int
    blocks_per_sm: int
    api_blocks_per_sm: int | None = None
    carveout_bytes: int | None = None  # the published size inside the measured range, if exactly one is
    carveout_range_bytes: tuple[int, int] | None = None  # [low, high): what residency proves


@frozen
class ClusterMeasurement:
    """Thread block clusters at one dynamic size (cc 9.0+)."""

    dynamic_bytes: int
    max_cluster_size_portable: int | None = None
    max_cluster_size_nonportable: int | None = None
    api_max_cluster_size: int | None = None
    # cluster size -> {"measured": n, "api": n}
    active_clusters: dict[str, dict[str, int | None]] = field(default_factory=dict)
    dsm_verified: bool | None = None


@frozen
class Measured:
    """What the GPU did. None: not measured (or not measurable on this cc)."""

    default_dynamic_ceiling_bytes: int | None = None
    default_api_available_dynamic_bytes: int | None = None  # the same API on the never-raised function
    optin_dynamic_ceiling_bytes: int | None = None
    attribute_accept_ceiling_bytes: int | None = None
    static_splits: tuple[StaticSplit, ...] = ()
    reserved_bytes: int | None = None
    allocation_granularity_bytes: int | None = None
    probes: dict[str, int] = field(default_factory=dict)
    searches: dict[str, Ceiling] = field(default_factory=dict)
    registers_at_ceiling: dict[str, int | None] | None = None
    residency: tuple[ResidencyStep, ...] = ()
    smem_per_sm_bytes: int | None = None
    carveout: tuple[CarveoutPoint, ...] = ()
    clusters: tuple[ClusterMeasurement, ...] = ()
    clusters_skipped: str | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    level: str = DEFAULT_LEVEL  # what was asked to be measured (core/levels.py)
    march: MarchResult | None = None
    granule_sweep: GranuleSweep | None = None
    leftovers: Leftovers | None = None
    # Quantities declared (core/quantities.py) without a field of their own, by name; None: not measured.
    quantities: dict[str, int | None] = field(default_factory=dict)


@frozen
class DeviceReport:
    """Everything known about one device; ``error`` is None when it was measured completely."""

    index: int
    name: str | None = None
    compute_capability: str | None = None
    backend: str = "unknown"
    context: DeviceContext = field(default_factory=DeviceContext)
    reported: ReportedAttributes = field(default_factory=ReportedAttributes)
    measured: Measured | None = None
    verdicts: tuple[Verdict, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    elapsed_s: float | None = None
    summary: DeviceSummary | None = None  # the status fields, set when the run's exit code is known

    @property
    def mismatches(self) -> list[Verdict]:
        """The rows that fail the run."""
        return [v for v in self.verdicts if v.verdict == Conclusion.MISMATCH]

    @property
    def differences(self) -> list[Verdict]:
        """Rows where the device did better than a prediction or a hint: shown, not failed (unless strict)."""
        return [v for v in self.verdicts if v.verdict == Conclusion.DIFFERS]

    @property
    def incomplete(self) -> bool:
        """The device was not measured completely, or a row could not be measured."""
        return self.error is not None or any(v.verdict == Conclusion.ERROR for v in self.verdicts)


@frozen
class Report:
    """One run of the tool: every device it was asked to measure."""

    tool_version: str
    created_utc: str
    host: str
    backend: str
    devices: tuple[DeviceReport, ...]
    schema: str = REPORT_SCHEMA
    host_context: dict[str, Any] = field(default_factory=dict)
    level: str = DEFAULT_LEVEL
    result: str | None = None  # core/status.py RESULTS: the process's outcome, as ``exit_code`` is its code
    exit_code: int | None = None
    error: str | None = None  # why the run is not complete (no GPU, a device not measured), else None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return to_jsonable(self)

    @property
    def created_unix_seconds(self) -> int:
        """``created_utc`` (``2025-12-01T09:39:00+00:00``) as Unix seconds; a time without a zone is UTC."""
        when = dt.datetime.fromisoformat(self.created_utc)
        return int((when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp())

    def by_gpu(self) -> list[tuple[DeviceReport, ...]]:
        """The devices grouped by GPU: ``--backend all`` lists each device once per backend, under one index;
        the first of a group is the first backend's, whose rows hold the cross-checks with the others."""
        groups: dict[int, list[DeviceReport]] = {}
        for dev in self.devices:
            groups.setdefault(dev.index, []).append(dev)
        return [tuple(group) for group in groups.values()]
