"""One reading of a probe's outcome, for every experiment: it fitted, it was too big, or it is a fault."""

from __future__ import annotations

from bisect_smem.core.errors import ProbeFault
from bisect_smem.devices.probes import TOO_BIG, Outcome, ProbeResult

NOTHING_TOO_BIG: frozenset[Outcome] = frozenset()  # where the probe must run: any failure is a fault


def expect(outcome: ProbeResult, what: str, too_big: frozenset[Outcome] = TOO_BIG) -> bool:
    """True for a verified success, False for an outcome class in ``too_big`` (the CUDA errors that mean
    "too big" unless told otherwise); anything else raises ProbeFault naming ``what``."""
    if outcome.ok:
        return True
    if outcome.outcome in too_big:
        return False
    raise ProbeFault(what, outcome.outcome, outcome.detail)
