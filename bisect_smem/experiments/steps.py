"""The typed steps of one device's measurement, their typed results, and the Measured they add up to.

A step is the unit a restarted worker resumes after: each is a small frozen dataclass (picklable, so it
crosses from a worker to the parent as a dictionary key) that knows how to run itself on a
DeviceMeasurement and which fields of ``Measured`` its result fills. ``key`` is its stable name in
events, progress lines and ``--inject-fault`` (``static_split:0:128``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from bisect_smem.core.errors import MeasurementError
from bisect_smem.core.hardware import DEFAULT_GRANULE_BYTES
from bisect_smem.core.levels import is_reference_split
from bisect_smem.core.model import CarveoutPoint, Ceiling, ClusterMeasurement, Measured, ResidencyStep, StaticSplit
from bisect_smem.core.profiles import ArchProfile

if TYPE_CHECKING:
    from bisect_smem.experiments.measure import DeviceMeasurement


@dataclass(frozen=True)
class BlockRegisters:
    """Reserved bytes and allocation granularity as a running block reads them (None below cc 8.0)."""

    reserved_bytes: int | None
    granule_bytes: int | None
    at_ceiling: dict[str, int | None] | None


@dataclass(frozen=True)
class ResidencyResult:
    """The residency staircase and the per-SM capacity it proves."""

    steps: tuple[ResidencyStep, ...]
    smem_per_sm_bytes: int | None


@dataclass(frozen=True)
class CarveoutResult:
    """Residency under every carveout preference."""

    points: tuple[CarveoutPoint, ...]


@dataclass(frozen=True)
class ClusterResult:
    """Cluster measurements, or why clusters were not measured here."""

    measurements: tuple[ClusterMeasurement, ...] = ()
    skipped: str | None = None


StepValue = Ceiling | StaticSplit | BlockRegisters | ResidencyResult | CarveoutResult | ClusterResult


@dataclass(frozen=True)
class StepResult:
    """What one step produced, small and picklable, so it can cross from a worker to the parent."""

    step: Step
    value: StepValue | None
    searches: dict[str, Ceiling]
    extra_probes: dict[str, int]
    error: str | None
    seconds: float


Done = dict["Step", StepResult]


@dataclass(frozen=True)
class Step:
    """One measurement step; subclasses set ``kind`` and implement ``run`` and ``contribute``."""

    kind: ClassVar[str] = ""

    @property
    def key(self) -> str:
        """The step's stable name: its kind, plus its parameters where it has some."""
        return self.kind

    def run(self, m: DeviceMeasurement, done: Done) -> StepValue:
        """Measure this step on ``m``; ``done`` holds the results of earlier steps."""
        raise NotImplementedError

    def contribute(self, value: Any) -> dict[str, Any]:
        """The ``Measured`` fields this step's result fills."""
        raise NotImplementedError


@dataclass(frozen=True)
class DefaultCeiling(Step):
    """The largest dynamic size that launches without opt-in."""

    kind: ClassVar[str] = "default_ceiling"

    def run(self, m: DeviceMeasurement, done: Done) -> Ceiling:
        """Search the default ceiling."""
        return m.measure_default_ceiling()

    def contribute(self, value: Ceiling) -> dict[str, Any]:
        """The default ceiling, and what cuOccupancyAvailableDynamicSMemPerBlock says beside it."""
        return {"default_dynamic_ceiling_bytes": value.ceiling_bytes,
                "default_api_available_dynamic_bytes": value.api_available_dynamic_bytes}


@dataclass(frozen=True)
class AttributeAcceptCeiling(Step):
    """The largest value cudaFuncSetAttribute(MaxDynamicSharedMemorySize) accepts."""

    kind: ClassVar[str] = "attribute_accept_ceiling"

    def run(self, m: DeviceMeasurement, done: Done) -> Ceiling:
        """Search the attribute's ceiling."""
        return m.measure_attribute_accept_ceiling()

    def contribute(self, value: Ceiling) -> dict[str, Any]:
        """The attribute's ceiling."""
        return {"attribute_accept_ceiling_bytes": value.ceiling_bytes}


@dataclass(frozen=True)
class StaticSplitStep(Step):
    """The opt-in dynamic ceiling beside ``static_bytes`` of static data, in blocks of ``threads``."""

    static_bytes: int
    threads: int
    kind: ClassVar[str] = "static_split"

    @property
    def key(self) -> str:
        """``static_split:<static bytes>:<threads>``."""
        return f"{self.kind}:{self.static_bytes}:{self.threads}"

    @property
    def is_reference(self) -> bool:
        """The reference split (core/levels.py) is the opt-in ceiling the later steps build on."""
        return is_reference_split(self.static_bytes, self.threads)

    def run(self, m: DeviceMeasurement, done: Done) -> StaticSplit:
        """Search the opt-in ceiling beside the static data."""
        return m.measure_static_split(self.static_bytes, self.threads)

    def contribute(self, value: StaticSplit) -> dict[str, Any]:
        """The split, and the opt-in ceiling where this is the reference split."""
        fields: dict[str, Any] = {"static_splits": (value,)}
        if self.is_reference:
            fields["optin_dynamic_ceiling_bytes"] = value.dynamic_ceiling_bytes
        return fields


@dataclass(frozen=True)
class BlockRegistersStep(Step):
    """Reserved bytes and granularity from the PTX registers, and the registers at the opt-in ceiling."""

    kind: ClassVar[str] = "block_registers"

    def run(self, m: DeviceMeasurement, done: Done) -> BlockRegisters:
        """Read the registers of running blocks."""
        return m.measure_block_registers(reference_optin(done))

    def contribute(self, value: BlockRegisters) -> dict[str, Any]:
        """Reserved bytes, granularity and the registers at the ceiling."""
        return {"reserved_bytes": value.reserved_bytes, "allocation_granularity_bytes": value.granule_bytes,
                "registers_at_ceiling": value.at_ceiling}


@dataclass(frozen=True)
class ResidencyStaircase(Step):
    """Blocks resident per SM from 0 B to the opt-in ceiling, and the per-SM capacity."""

    kind: ClassVar[str] = "residency"

    def run(self, m: DeviceMeasurement, done: Done) -> ResidencyResult:
        """Measure the staircase."""
        return m.measure_residency(require_optin(done), done)

    def contribute(self, value: ResidencyResult) -> dict[str, Any]:
        """The staircase and the per-SM capacity."""
        return {"residency": value.steps, "smem_per_sm_bytes": value.smem_per_sm_bytes}


@dataclass(frozen=True)
class CarveoutSweep(Step):
    """Residency under every carveout preference."""

    kind: ClassVar[str] = "carveout"

    def run(self, m: DeviceMeasurement, done: Done) -> CarveoutResult:
        """Sweep the carveout preferences."""
        return m.measure_carveout(require_optin(done), done)

    def contribute(self, value: CarveoutResult) -> dict[str, Any]:
        """The carveout points."""
        return {"carveout": value.points}


@dataclass(frozen=True)
class ClusterStep(Step):
    """Thread block clusters (cc 9.0+)."""

    kind: ClassVar[str] = "clusters"

    def run(self, m: DeviceMeasurement, done: Done) -> ClusterResult:
        """Measure clusters, or say why not."""
        return m.measure_clusters(require_optin(done), done)

    def contribute(self, value: ClusterResult) -> dict[str, Any]:
        """The cluster measurements, or why they were skipped."""
        return {"clusters": value.measurements, "clusters_skipped": value.skipped}


def reference_optin(done: Done) -> int | None:
    """The reference opt-in ceiling, if its step finished."""
    for result in done.values():
        if isinstance(result.step, StaticSplitStep) and result.step.is_reference and result.value is not None:
            return result.value.dynamic_ceiling_bytes
    return None


def require_optin(done: Done) -> int:
    """The reference opt-in ceiling, which residency, carveout and clusters build on."""
    optin = reference_optin(done)
    if optin is None:
        raise MeasurementError("needs the opt-in ceiling, which was not measured")
    return optin


def block_registers(done: Done) -> BlockRegisters:
    """The block-register step's result, or all unknown."""
    for result in done.values():
        if isinstance(result.value, BlockRegisters):
            return result.value
    return BlockRegisters(None, None, None)


def granule_bytes(done: Done, profile: ArchProfile | None) -> int:
    """The allocation granularity: measured (cc 8.0+), else published, else the occupancy calculator's unit."""
    measured = block_registers(done).granule_bytes
    if measured:
        return measured
    return profile.allocation_granularity_bytes if profile else DEFAULT_GRANULE_BYTES


def assemble(done: Done) -> tuple[Measured, list[str]]:
    """The device's Measured from its step results, in any order, and the errors of failed steps."""
    fields: dict[str, Any] = {}
    probes: dict[str, int] = {}
    searches: dict[str, Ceiling] = {}
    timings: dict[str, float] = {}
    for result in done.values():
        if result.value is not None:
            for name, value in result.step.contribute(result.value).items():
                fields[name] = fields.get(name, ()) + value if name == "static_splits" else value
        searches.update(result.searches)
        for key, count in result.extra_probes.items():
            probes[key] = probes.get(key, 0) + count
        timing = "static_splits" if isinstance(result.step, StaticSplitStep) else result.step.key
        timings[timing] = round(timings.get(timing, 0.0) + result.seconds, 6)
    probes.update({name: c.probes for name, c in searches.items()})
    measured = Measured(**fields, probes=probes, searches=searches, timings_s=timings)
    return measured, [r.error for r in done.values() if r.error]
