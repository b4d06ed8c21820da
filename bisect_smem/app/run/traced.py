"""The user's command, run with the collector injected: CUDA_INJECTION64_PATH names it in the environment the
command and every process it starts inherit. Its output passes through untouched (it keeps the tool's
stdin, stdout and stderr), a signal sent to the tool reaches it once, and its exit code comes back.

Signals, as sudo relays them. The command runs in a process group of its own, so a signal sent to the tool's
process group reaches the tool alone, which relays it to the command's pid once; a signal sent to the tool's
pid is relayed the same way (RELAYED: every signal that would otherwise end or stop the tool). Where the tool is
the foreground of its terminal, the command's group is made the foreground while it runs: Ctrl-C, Ctrl-\\ and
Ctrl-Z at the terminal then reach the command's processes, and only them, as they would without the tool; the
terminal is given back when the command ends. When Ctrl-Z stops the command, the tool stops itself with the
same signal, so the shell sees the job stop; ``fg`` or ``bg`` continues the tool, which continues the command
(with the terminal again for ``fg``). SIGKILL cannot be relayed: the kernel then kills the command too
(PR_SET_PDEATHSIG), except across a set-user-ID program, for which the kernel clears that setting.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import FrameType

from bisect_smem.core.errors import CommandNotExecutable, CommandNotFound

RELAYED = tuple(getattr(signal, name) for name in (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
    "SIGPWR", "SIGTSTP") if hasattr(signal, name))
TERMINAL_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)  # the stops a job-control shell resumes
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@contextlib.contextmanager
def _ttou_blocked() -> Iterator[None]:
    """SIGTTOU blocked: a process outside the terminal's foreground may then hand the terminal over
    (tcsetpgrp) instead of being stopped for trying."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _hand_terminal(fd: int, group: int) -> None:
    with _ttou_blocked(), contextlib.suppress(OSError):  # the group may be gone already: nothing to hand over
        os.tcsetpgrp(fd, group)


class _Terminal:
    """The controlling terminal (None where the tool has none): whose foreground the command's group is."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def opened(cls) -> _Terminal | None:
        try:
            return cls(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC))
        except OSError:
            return None

    def ours(self) -> bool:
        """Whether the tool's process group is the terminal's foreground."""
        try:
            return os.tcgetpgrp(self.fd) == os.getpgrp()
        except OSError:
            return False

    def owner(self) -> int | None:
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def close(self) -> None:
        os.close(self.fd)


def _set_parent_death_signal(signum: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def _child_setup(terminal_fd: int | None, tool: int) -> Callable[[], None]:
    """What the command's process does between fork and exec: a process group of its own, death with the tool,
    and the terminal's foreground where the tool gave it (done here too, so that a command that reads the
    terminal at once is never stopped for reading it before the tool's own tcsetpgrp)."""

    def setup() -> None:
        os.setpgid(0, 0)
        _set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != tool:  # the tool died before the line above, so nothing would end this process
            os.kill(os.getpid(), signal.SIGKILL)
        if terminal_fd is not None:
            _hand_terminal(terminal_fd, os.getpid())

    return setup


def _start(command: Sequence[str], environment: Mapping[str, str], terminal_fd: int | None) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(list(command), env=dict(environment),  # noqa: S603 - the user's own command
                                preexec_fn=_child_setup(terminal_fd, os.getpid()))  # noqa: PLW1509 - no threads yet
    except FileNotFoundError:
        raise CommandNotFound(f"{command[0]}: command not found") from None
    except PermissionError:
        raise CommandNotExecutable(f"{command[0]}: permission denied (not executable)") from None
    except OSError as exc:
        raise CommandNotExecutable(f"{command[0]}: cannot run it: {exc.strerror or exc}") from None


class _Relay:
    """The tool's handlers of RELAYED: each signal the tool gets goes to the command's pid once (to the pid, not
    its group: a program that relays to its own workers, as torchrun and mpirun do, would give them two)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.pending: list[int] = []  # signals that came before the command had a pid
        self.previous: dict[int, signal.Handlers | Callable[[int, FrameType | None], object] | int | None] = {}

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.pid is None:
            self.pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def install(self) -> None:
        for signum in RELAYED:
            if signal.getsignal(signum) == signal.SIG_IGN:
                continue  # ignored (nohup, a shell's background job): the command inherits that, as it would
            try:
                self.previous[signum] = signal.signal(signum, self)
            except ValueError:  # not the main thread: the command still runs, signals stay as they are
                break

    def started(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            self(signum, None)
        self.pending.clear()

    def ended(self) -> None:
        self.pid = None  # its pid may be reused once reaped: nothing more goes to it
        self.pending.clear()

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    @contextlib.contextmanager
    def default(self, signum: int) -> Iterator[None]:
        """``signum`` with its default action for a moment (the tool stopping itself)."""
        handler = signal.signal(signum, signal.SIG_DFL) if signum in self.previous else None
        try:
            yield
        finally:
            if signum in self.previous:
                signal.signal(signum, handler)


def _stopped(pid: int, signum: int, terminal: _Terminal | None, relay: _Relay) -> None:
    """The command stopped with ``signum``: where it was a terminal's stop, stop the tool the same way, and when
    the tool is continued, continue the command (with the terminal, where the tool is its foreground again)."""
    if signum not in TERMINAL_STOPS:
        return  # SIGSTOP from elsewhere (a debugger, kill -STOP): whoever stopped it continues it
    tool = os.getpgrp()
    if terminal is not None and signum != signal.SIGTSTP and terminal.owner() == tool:
        # It read or wrote the terminal while the tool had it (the tool was brought to the foreground with fg
        # after starting in the background): hand it over, and go on.
        _hand_terminal(terminal.fd, pid)
    else:
        if terminal is not None and terminal.owner() == pid:
            _hand_terminal(terminal.fd, tool)
        with relay.default(signum):
            os.kill(os.getpid(), signum)  # returns when continued (at once in an orphaned process group)
        if terminal is not None and terminal.ours():
            _hand_terminal(terminal.fd, pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGCONT)


def _wait(child: subprocess.Popen[bytes], terminal: _Terminal | None, relay: _Relay) -> int:
    while True:
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            _stopped(child.pid, os.WSTOPSIG(status), terminal, relay)
            continue
        relay.ended()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        return child.returncode


def run_traced(command: Sequence[str], environment: Mapping[str, str],
               alongside: AbstractContextManager[object] | None = None) -> int:
    """Run ``command`` with ``environment`` until it ends; its exit code (128+N when signal N ended it).
    ``alongside`` is entered once the command has started (a thread may start there: none runs while the
    command's process is forked) and left when it has ended."""
    terminal = _Terminal.opened()
    handed = terminal is not None and terminal.ours()
    child: subprocess.Popen[bytes] | None = None
    relay = _Relay()
    relay.install()
    try:
        child = _start(command, environment, terminal.fd if terminal is not None and handed else None)
        with contextlib.suppress(OSError):  # it may have exec'd already (EACCES): it set its group itself
            os.setpgid(child.pid, child.pid)
        if terminal is not None and handed:
            _hand_terminal(terminal.fd, child.pid)
        relay.started(child.pid)
        with alongside or nullcontext():
            code = _wait(child, terminal, relay)
    finally:
        relay.ended()
        if terminal is not None:
            # Back to the tool only from the command (which may have taken it and then failed to exec): after
            # Ctrl-Z and bg the shell has it, and keeps it.
            if handed and (child is None or terminal.owner() == child.pid):
                _hand_terminal(terminal.fd, os.getpgrp())
            terminal.close()
        relay.restore()
    return 128 - code if code < 0 else code
