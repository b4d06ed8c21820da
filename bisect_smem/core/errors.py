"""The one exception hierarchy of bisect_smem. Library code raises these; only cli.py turns them into exit codes."""

from __future__ import annotations


class BisectSmemError(Exception):
    """Base class of every error bisect_smem raises on purpose."""


class UsageError(BisectSmemError):
    """Bad input from the user: an unknown name, a malformed size, an unusable path (exit 2)."""


class BackendUnavailable(BisectSmemError):
    """No usable GPU, driver or backend package (exit 3)."""


class KernelCompileError(BisectSmemError):
    """A probe kernel failed to compile; carries the compiler log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class MeasurementError(BisectSmemError):
    """A measurement could not be completed: an unexpected CUDA error, an unstable boundary (exit 4)."""


class BaselineError(BisectSmemError):
    """A baseline or report file is missing, corrupt, foreign or would be overwritten (exit 2)."""


class ProbeFault(MeasurementError):
    """A probe ended in a class that is neither success nor "too big" (an Outcome from backends.base)."""

    def __init__(self, what: str, outcome: object, detail: str = "") -> None:
        super().__init__(f"{what}: unexpected {getattr(outcome, 'value', outcome)} ({detail})")
        self.outcome = outcome

    @property
    def sticky(self) -> bool:
        """Faults after which the CUDA context is unusable: only a new process recovers."""
        return getattr(self.outcome, "value", None) in ("illegal_address", "timeout")


class OutputError(UsageError):
    """A file or stream the tool must write cannot be written: a full disk, a read-only folder (exit 2)."""
