"""The verdict in one word: a device's status with its rows counted and the reason, and the run's result.

A report carries these so that a consumer reads them instead of recounting the verdict rows (DCGM's
``test_summary.status`` is the model). ``RESULTS`` names each exit code a report can be written with.
"""

from __future__ import annotations

import enum

from bisect_smem.core.errors import ExitCode
from bisect_smem.core.frozen import frozen

NFD_DEFAULT_EXPIRY_S = 86400  # a feature file's labels stay a day, unless --nfd-expiry says otherwise



class Status(enum.StrEnum):
    """One device in a word."""

    PASS = "pass"
    FAIL = "fail"  # a mismatch, a regression against the baseline, or with --strict a row that differs
    INCOMPLETE = "incomplete"


class RunResult(enum.StrEnum):
    """The run's outcome in a word, as its exit code is in a number."""

    PASS = "pass"
    FAIL = "fail"
    BAD_INPUT = "bad_input"
    NO_GPU = "no_gpu"
    INCOMPLETE = "incomplete"


STATUSES = tuple(Status)
# The run's result by exit code: a report is written on 0, 1, 3 and 4, and on 2 when --compare finds no
# baseline after measuring; a signal (128+N) writes none.
RESULTS = {ExitCode.OK: RunResult.PASS, ExitCode.MISMATCH: RunResult.FAIL, ExitCode.USAGE: RunResult.BAD_INPUT,
           ExitCode.NO_GPU: RunResult.NO_GPU, ExitCode.INCOMPLETE: RunResult.INCOMPLETE}


def result_for(exit_code: int) -> RunResult:
    """The ``result`` word of a report written with ``exit_code``."""
    if exit_code not in RESULTS:
        raise ValueError(f"no report is written with exit code {exit_code}")
    return RESULTS[exit_code]


@frozen
class VerdictCounts:
    """How many verdict rows of a device are of each verdict (``mismatch`` counts ``MISMATCH`` rows,
    ``error`` counts ``ERROR`` rows)."""

    match: int = 0
    mismatch: int = 0
    differs: int = 0
    info: int = 0
    error: int = 0


@frozen
class DeviceSummary:
    """One device in a word: ``pass``, ``fail`` (a mismatch, a regression against the baseline, or with
    --strict a row that differs) or ``incomplete``; the rows counted; and the first failing or
    unmeasured row in one line (None on ``pass``)."""

    status: Status
    counts: VerdictCounts = VerdictCounts()
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)} (got {self.status!r})")
        object.__setattr__(self, "status", Status(self.status))  # a word given as text is held as its member
