"""The step loop of one device: each step runs with its context, what it measured is kept, and an error
becomes that step's error. The experiments themselves are in ceilings, residency, clusters and validation.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.experiments.config import MeasureConfig
from bisect_smem.experiments.context import DeviceFacts, Prior, Progress, StepContext, WriteElsewhere
from bisect_smem.experiments.steps import Done, Step, StepResult, assemble


class DeviceMeasurement:
    """The steps on one device, with the Prior they share built once (when a step first asks for it)."""

    def __init__(self, session: DeviceSession, config: MeasureConfig, progress: Progress | None = None,
                 facts: DeviceFacts | None = None, write_elsewhere: WriteElsewhere | None = None) -> None:
        """``facts`` (what the device reported, its published row) only feed formulas and labels;
        ``write_elsewhere`` runs the leftover writer in another process (validation.py)."""
        self.session = session
        self.config = config
        self.facts = facts or DeviceFacts()
        self.progress = progress or (lambda _text: None)
        self.write_elsewhere = write_elsewhere
        self.probes: Counter[str] = Counter()  # the probes that are not ceiling searches, by experiment
        self._prior: Prior | None = None

    @classmethod
    def for_device(cls, session: DeviceSession, info: DeviceInfo, config: MeasureConfig,
                   progress: Progress | None = None, write_elsewhere: WriteElsewhere | None = None) -> DeviceMeasurement:
        """The steps on an opened device, fed by what it reports and its published row."""
        return cls(session, config, progress, DeviceFacts.of(info), write_elsewhere)

    def context(self, done: Done) -> StepContext:
        """The context of the next step, after the steps in ``done``."""
        earlier, _ = assemble(done)

        def prior() -> Prior:
            if self._prior is None:
                self._prior = Prior.build(earlier, self.facts)
            return self._prior

        return StepContext(self.session, self.progress, self.config, self.facts, earlier, prior,
                           self.write_elsewhere, self.probes)

    def run_steps(self, steps: list[Step], done: Done) -> list[StepResult]:
        """Run one step, or the steps of one group together (their probes share rounds), each with its own
        context; the group's seconds are shared out evenly. A sticky fault propagates (only a new process
        recovers); any other error becomes that step's error, and the quantities it would have measured
        stay None."""
        contexts = [self.context(done) for _ in steps]
        before = Counter(self.probes)
        start = time.perf_counter()
        try:
            values = type(steps[0]).run_group(steps, contexts) if len(steps) > 1 else [_value(steps[0], contexts[0])]
        except (ProbeFault, MeasurementError) as exc:
            if isinstance(exc, ProbeFault) and exc.sticky:
                raise
            values = [exc] * len(steps)
        seconds = round((time.perf_counter() - start) / len(steps), 6)
        extra = {k: v - before[k] for k, v in self.probes.items() if v - before[k]}
        results = []
        for i, (step, ctx, value) in enumerate(zip(steps, contexts, values, strict=True)):
            failed = isinstance(value, ProbeFault | MeasurementError)
            if isinstance(value, ProbeFault) and value.sticky:
                raise value
            results.append(StepResult(step, None if failed else value, dict(ctx.searches), extra if i == 0 else {},
                                      f"{step.key}: {value}" if failed else None, seconds))
        return results

    def each_step(self, steps: list[Step], done: Done, starting: Callable[[Step], None] = lambda _step: None,
                  together: Callable[[Step], bool] = lambda _step: True) -> Iterator[tuple[Step, StepResult]]:
        """Run the steps not in ``done``, in order, each after ``starting(step)``; steps of one group that
        follow each other run together where ``together`` allows each of them. Each result is added to
        ``done`` and yielded. A sticky fault propagates: the caller decides what a lost context ends."""
        pending = [step for step in steps if step not in done]
        while pending:
            group = [pending.pop(0)]
            while (pending and group[0].group is not None and pending[0].group == group[0].group
                   and together(group[0]) and together(pending[0])):
                group.append(pending.pop(0))
            for step in group:
                starting(step)
            for step, result in zip(group, self.run_steps(group, done), strict=True):
                done[step] = result
                yield step, result

    def run(self, steps: list[Step]) -> tuple[Done, str | None]:
        """Every step in this process, in order, with no restarts: a sticky fault ends the run, and is
        returned as the error beside the steps done before it."""
        done: Done = {}
        started: list[Step] = []
        try:
            for _step_and_result in self.each_step(steps, done, started.append):
                pass
        except ProbeFault as fault:
            where = running_steps([s for s in started if s not in done])
            return done, f"{where}: {fault}; the context is lost, and an inline run cannot restart (drop --inline)"
        return done, None


def running_steps(steps: list[Step]) -> str:
    """What was running when a fault came: one step's key, or, for steps run together, the first one's
    and how many shared its rounds (a fault in a shared round is no one step's)."""
    if len(steps) == 1:
        return steps[0].key
    return f"{steps[0].key} and {len(steps) - 1} more steps sharing its rounds"


def _value(step: Step, ctx: StepContext) -> object:
    """One step's value; its MeasurementError or non-sticky ProbeFault is returned as its error."""
    try:
        return step.run(ctx)
    except ProbeFault as fault:
        if fault.sticky:
            raise
        return fault
    except MeasurementError as exc:
        return exc
