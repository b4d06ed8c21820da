"""What to measure: the ordered, typed steps of one device's measurement, from the configuration.

A step is the unit a restarted worker resumes after: done steps are kept, a step that faulted twice
is given up with an error, and the rest run in the new process.
"""

from __future__ import annotations

from bisect_smem.devices.backends.families import supports
from bisect_smem.experiments.ceilings import AttributeAcceptCeiling, BlockRegistersStep, DefaultCeiling, StaticSplitStep
from bisect_smem.experiments.clusters import ClusterStep
from bisect_smem.experiments.config import MeasureConfig
from bisect_smem.experiments.residency import CarveoutSweep, ResidencyStaircase
from bisect_smem.experiments.steps import Step
from bisect_smem.experiments.validation import VALIDATION_STEPS


def plan_steps(config: MeasureConfig, session_type: type | None = None) -> list[Step]:
    """The steps of the config's level, in order; with ``session_type`` (a backend's session class, None:
    every step), those of a probe family it does not implement are left out."""
    steps: list[Step] = [DefaultCeiling(), AttributeAcceptCeiling()]
    steps += [StaticSplitStep(s, t) for s in config.static_sizes for t in config.threads]
    steps.append(BlockRegistersStep())
    steps += [step for step, wanted in ((ResidencyStaircase(), config.residency), (CarveoutSweep(), config.carveout),
                                        (ClusterStep(), config.clusters)) if wanted]
    if config.level == "quick":
        steps = [s for s in steps if is_quick(s)]
    elif config.level == "full":
        steps += VALIDATION_STEPS
    if session_type is not None:
        steps = [s for s in steps if supports(session_type, s.family)]
    return steps


def is_quick(step: Step) -> bool:
    """The limits only: the default, attribute and reference opt-in ceilings, and the block registers
    (reserved bytes and granularity)."""
    if isinstance(step, StaticSplitStep):
        return step.is_reference
    return isinstance(step, (DefaultCeiling, AttributeAcceptCeiling, BlockRegistersStep))
