"""The one exception hierarchy of bisect_smem, and the exit codes: each exception class carries its own
(``exit_code``), so the command line turns any of them into one line and a code in one place."""

from __future__ import annotations

import enum
from typing import ClassVar

from bisect_smem.core.outcomes import STICKY, Outcome


class ExitCode(enum.IntEnum):
    """The tool's exit codes (128 + N for signal N comes on top)."""

    OK = 0  # no limit or source disagrees (``differs`` allowed unless --strict)
    MISMATCH = 1  # a mismatch or regression was found
    USAGE = 2  # bad usage or bad input, or an output that cannot be written
    NO_GPU = 3  # no usable GPU or backend
    INCOMPLETE = 4  # a measurement could not be completed
    NOT_EXECUTABLE = 126  # trace: the command was found but cannot be run (as the shells say it)
    NOT_FOUND = 127  # trace: the command was not found


SIGNAL_EXIT_BASE = 128  # ended by signal N: 128 + N


class BisectSmemError(Exception):
    """Base class of every error bisect_smem raises on purpose."""

    exit_code: ClassVar[ExitCode] = ExitCode.INCOMPLETE

    def describe(self) -> str:
        """The one line a person reads after ``error: ``."""
        return str(self)


class UsageError(BisectSmemError):
    """Bad input from the user: an unknown name, a malformed size, an unusable path (exit 2)."""

    exit_code = ExitCode.USAGE


class BackendUnavailable(BisectSmemError):
    """No usable GPU, driver or backend package (exit 3)."""

    exit_code = ExitCode.NO_GPU

    def describe(self) -> str:
        """The reason, and what runs without a GPU."""
        return f"no usable GPU: {self}; try --simulate h200 to run on a simulated device"


class KernelCompileError(BisectSmemError):
    """A probe kernel failed to compile; carries the compiler log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class MeasurementError(BisectSmemError):
    """A measurement could not be completed: an unexpected CUDA error, an unstable boundary (exit 4)."""


class BaselineError(BisectSmemError):
    """A baseline or report file is missing, corrupt, foreign or would be overwritten (exit 2)."""

    exit_code = ExitCode.USAGE


class ProbeFault(MeasurementError):
    """A probe ended in a class (core/outcomes.py) that is neither success nor "too big"."""

    def __init__(self, what: str, outcome: Outcome, detail: str = "") -> None:
        super().__init__(f"{what}: unexpected {outcome.value} ({detail})")
        self.outcome = outcome

    @property
    def sticky(self) -> bool:
        """Faults after which the CUDA context is unusable: only a new process recovers."""
        return self.outcome in STICKY


class OutputError(UsageError):
    """A file or stream the tool must write cannot be written: a full disk, a read-only folder (exit 2)."""


class TraceUnavailable(BisectSmemError):
    """trace's collector cannot run here: no libcupti, or it cannot be built for a command that is not Python
    (exit 3)."""

    exit_code = ExitCode.NO_GPU


class CommandNotStarted(UsageError):
    """trace's command could not be started (its exit code is the shells')."""


class CommandNotFound(CommandNotStarted):
    """trace's command was not found (exit 127)."""

    exit_code = ExitCode.NOT_FOUND


class CommandNotExecutable(CommandNotStarted):
    """trace's command was found but cannot be run (exit 126)."""

    exit_code = ExitCode.NOT_EXECUTABLE
