"""The unit of a device's measurement: a step, what it produced, and the Measured the results add up to.

A step is the unit a restarted worker resumes after: each is a small frozen dataclass (picklable, so it
crosses from a worker to the parent as a dictionary key) that runs itself with a StepContext
(``run(ctx) -> value``) and says what its value fills (``contribute``: typed ``Filled`` values of the quantities and records declared in
core/quantities.py and core/records.py). ``key``
is its stable name in events, progress lines and ``--inject-fault`` (``static_split:0:128``). The steps
themselves live with their experiments: ceilings, residency, clusters, validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import Ceiling, Measured
from bisect_smem.core.quantities import MEASURED_FIELDS
from bisect_smem.core.records import Filled, Record
from bisect_smem.devices.backends.families import Ceilings
from bisect_smem.experiments.context import StepContext


@frozen
class StepResult:
    """What one step produced, small and picklable, so it can cross from a worker to the parent."""

    step: Step
    value: Any  # the step's own result type (its experiment module defines it); None when it failed
    searches: dict[str, Ceiling]
    extra_probes: dict[str, int]
    error: str | None
    seconds: float


Done = dict["Step", StepResult]


@frozen
class Step:
    """One measurement step; subclasses set ``kind`` and implement ``run`` and ``contribute``."""

    kind: ClassVar[str] = ""
    # The probe family a backend's sessions must implement for this step to be planned: the ceilings,
    # which every backend measures, unless the step names another.
    family: ClassVar[type] = Ceilings
    # The name its seconds are kept under where steps of its kind share one (the static splits); None: its key.
    timing_name: ClassVar[str | None] = None
    # Steps of one group that follow each other in the plan may run together (``run_group``): their
    # probes share rounds. None: the step runs alone.
    group: ClassVar[str | None] = None

    @property
    def key(self) -> str:
        """The step's stable name: its kind, plus its parameters where it has some."""
        return self.kind

    def run(self, ctx: StepContext) -> Any:
        """Measure this step on the context's device."""
        raise NotImplementedError

    def contribute(self, value: Any) -> tuple[Filled, ...]:
        """What this step's result fills: each declared quantity or record, and its value."""
        raise NotImplementedError

    @classmethod
    def run_group(cls, steps: Sequence[Step], contexts: Sequence[StepContext]) -> list[Any]:
        """Run steps of this group together, each with its own context: each one's value, or the
        MeasurementError or ProbeFault that is its own error. A sticky fault propagates."""
        raise NotImplementedError


def assemble(done: Done) -> tuple[Measured, list[str]]:
    """The device's Measured from its step results, in any order, and the errors of failed steps."""
    fields: dict[str, Any] = {}
    more: dict[str, Any] = {}
    probes: dict[str, int] = {}
    searches: dict[str, Ceiling] = {}
    timings: dict[str, float] = {}
    for result in done.values():
        if result.value is not None:
            for filled in result.step.contribute(result.value):
                name, value = filled.what.name, filled.value
                if name not in MEASURED_FIELDS:  # a declared quantity without a field of its own
                    more[name] = value
                elif isinstance(filled.what, Record) and filled.what.adds:
                    fields[name] = fields.get(name, ()) + value
                else:
                    fields[name] = value
        searches.update(result.searches)
        for key, count in result.extra_probes.items():
            probes[key] = probes.get(key, 0) + count
        timing = result.step.timing_name or result.step.key
        timings[timing] = round(timings.get(timing, 0.0) + result.seconds, 6)
    probes.update({name: c.probes for name, c in searches.items()})
    measured = Measured(**fields, probes=probes, searches=searches, timings_s=timings, quantities=more)
    return measured, [r.error for r in done.values() if r.error]
