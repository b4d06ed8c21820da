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

    def run_step(self, step: Step, done: Done) -> StepResult:
        """Run one step. A sticky fault propagates (only a new process recovers); any other error becomes
        the step's error, and the quantities it would have measured stay None."""
        ctx = self.context(done)
        before = Counter(self.probes)
        start = time.perf_counter()
        value = None
        error = None
        try:
            value = step.run(ctx)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            error = f"{step.key}: {fault}"
        except MeasurementError as exc:
            error = f"{step.key}: {exc}"
        extra = {k: v - before[k] for k, v in self.probes.items() if v - before[k]}
        return StepResult(step, value, dict(ctx.searches), extra, error, round(time.perf_counter() - start, 6))

    def each_step(self, steps: list[Step], done: Done,
                  starting: Callable[[Step], None] = lambda _step: None) -> Iterator[tuple[Step, StepResult]]:
        """Run the steps not in ``done``, in order, each after ``starting(step)``; each result is added to
        ``done`` and yielded. A sticky fault propagates: the caller decides what a lost context ends."""
        for step in steps:
            if step in done:
                continue
            starting(step)
            done[step] = result = self.run_step(step, done)
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
            return done, f"{started[-1].key}: {fault}; the context is lost, and an inline run cannot restart (drop --inline)"
        return done, None
