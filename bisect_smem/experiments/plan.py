"""What to measure: the ordered steps of one device's measurement, from the configuration.

A step is the unit a restarted worker resumes after: done steps are kept, a step that faulted twice
is given up with an error, and the rest run in the new process.
"""

from __future__ import annotations

from bisect_smem.experiments.measure import MeasureConfig


def plan_steps(config: MeasureConfig, supported: tuple[str, ...] | None = None) -> list[str]:
    """The steps, in order; ``supported`` (a backend's step kinds, None for all) drops what it cannot do."""
    steps = ["default_ceiling", "attribute_accept_ceiling"]
    steps += [f"static_split:{s}:{t}" for s in config.static_sizes for t in config.threads]
    steps.append("block_registers")
    steps += [name for name, wanted in (("residency", config.residency), ("carveout", config.carveout),
                                        ("clusters", config.clusters)) if wanted]
    if supported is not None:
        steps = [s for s in steps if s.split(":")[0] in supported]
    return steps
