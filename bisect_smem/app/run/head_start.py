"""The head start of a measuring run: its device workers start before the tool imports the rest of itself.

A worker spends most of its life importing CuPy (or numba) and waiting for the driver to create its context;
the tool's own start (its imports, the parser, the request) is another fifth of a second. So ``python -m
bisect_smem`` calls ``start(argv)`` first, with nothing but the standard library loaded: when the command
line can only be a measuring run on real devices, one worker per device and backend starts there and then,
and preloads its backend. It is forked, not exec'd: nothing but the standard library and this module is
loaded yet, no thread runs and CUDA is untouched, so the child is as clean as a fresh interpreter and spares
the worker the interpreter's own start. The runner later hands each its job (``claim``); whatever no run
claims, because the options turned out to ask for something else or a device does not exist, is ended by
``release`` before anything is measured, and again when the command ends. Reading the command line here is
deliberately narrow: anything it does not recognise for certain gets no head start, and the runner starts
its workers itself, as it would without this module. The started workers are the run's, kept in its
session (core/session.py, ``started``) until claimed or released.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, TypeAlias

from bisect_smem.app.run.timeline import mark
from bisect_smem.core.session import Session

if TYPE_CHECKING:
    # Deferred to type checking: this module runs before anything else loads, so it imports only what it uses.
    import subprocess

# Arguments after which the run measures no real device, or the first word of a subcommand's command
# line (tests/reliability/test_head_start.py checks these against the parser's own).
NO_HEAD_START = frozenset({"-h", "--help", "--version", "--inline", "--simulate"})
READ_HERE = ("--backend", "--device", *NO_HEAD_START)  # argparse takes any unique prefix of these too

WAIT_POLL_S = 0.002
FORK_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ForkedWorker:
    """A worker forked from this process, with the part of ``subprocess.Popen``'s interface the runner
    uses: ``pid`` (it leads its own process group), ``stdin`` for the job, ``stdout`` for the messages,
    ``poll``, ``wait`` and ``returncode``."""

    def __init__(self, index: int, backend: str) -> None:
        job_read, job_write = os.pipe()
        messages_read, messages_write = os.pipe()
        # Signals wait until each side is itself again: the child must never run the entry point's handlers.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORK_SIGNALS)
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            raise
        if pid == 0:  # the worker
            for signum in FORK_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)  # not the entry point's handlers: this is another program
            os.setpgid(0, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            os.dup2(job_read, 0)
            os.dup2(messages_write, 1)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the parent's ends, and any other worker's pipes
            os._exit(_serve_forked(index, backend))
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            os.setpgid(pid, pid)  # as the child does: the group exists whichever of the two runs first
        except OSError:
            pass  # the child has set it, or has ended already
        os.close(job_read)
        os.close(messages_write)
        self.pid = pid
        self.stdin = os.fdopen(job_write, "wb")
        self.stdout = os.fdopen(messages_read, "rb")
        self.returncode: int | None = None
        self._reaping = _thread.allocate_lock()  # threading's Lock, without importing threading

    def poll(self) -> int | None:
        """The exit code (negative: the signal that ended it) once it has ended, else None. Safe from
        several threads (the runner's reader and its main thread both wait): one of them reaps."""
        with self._reaping:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped outside this object (SIGCHLD ignored): as Popen says, 0
                    pid, status = self.pid, 0
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                import subprocess  # deferred: only a wait that times out needs Popen's exception

                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(WAIT_POLL_S)
        return self.returncode


Worker: TypeAlias = "subprocess.Popen | ForkedWorker"  # a worker as the runner handles it, however it was started


def _serve_forked(index: int, backend: str) -> int:
    """The forked worker's life: the entry point a started worker runs, with the same arguments."""
    try:
        # Deferred: the forked worker loads its entry point; the tool's own process never needs it.
        from bisect_smem.app.run import worker_process

        return worker_process.main([str(index), "--context", "--preload", backend])
    except BaseException:  # noqa: BLE001 - the supervisor sees the exit code; the reason goes to stderr
        import traceback  # deferred: only a worker that failed prints one

        traceback.print_exc()
        return 1


def likely_devices() -> tuple[int, ...]:
    """A guess at the visible devices, free of any driver call, so that their workers can start at once:
    the CUDA_VISIBLE_DEVICES entries, else the /dev/nvidiaN nodes. The driver's count decides after."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = len([entry for entry in visible.split(",") if entry.strip()])
    else:
        count = len(device_nodes())
    return tuple(range(max(count, 1)))


def device_nodes(folder: str = "/dev") -> list[str]:
    """The /dev/nvidiaN nodes, one per GPU the driver exposes (not nvidiactl, nvidia-uvm, ...)."""
    try:
        return [name for name in os.listdir(folder) if name.startswith("nvidia") and name[6:].isdigit()]
    except OSError:
        return []


def planned_workers(argv: list[str], subcommands: Collection[str]) -> list[tuple[str, int]]:
    """The (backend, device) workers a measuring command line will certainly want; none where it may be
    anything else (one of ``subcommands``, --help, a simulated device, a backend this host lacks, an option
    spelled in a way this reading does not follow)."""
    backend: str | None = None
    devices: list[int] = []
    values = iter(argv)
    for arg in values:
        name, has_value, value = arg.partition("=")
        if name in NO_HEAD_START or arg in subcommands or _abbreviates(name):
            return []
        if name in ("--backend", "--device"):
            value = value if has_value else next(values, "")
            if name == "--backend":
                backend = value
            elif value.isdigit():
                devices.append(int(value))
            else:
                return []  # the parser will refuse it
    # Deferred: only a command line that may measure reads the backends' table; the others load no devices.
    from bisect_smem.devices.backends.table import BACKENDS, DEFAULT_BACKEND, REAL_BACKENDS

    backends = REAL_BACKENDS if backend == "all" else (backend or DEFAULT_BACKEND,)
    if not all(name in REAL_BACKENDS for name in backends):
        return []
    installed = [name for name in backends if BACKENDS[name].missing_module() is None]
    if not devices and not (os.environ.get("CUDA_VISIBLE_DEVICES") or device_nodes()):
        return []  # no sign of a GPU: the run will say so without any worker
    return [(name, index) for name in installed for index in dict.fromkeys(devices) or likely_devices()]


def _abbreviates(name: str) -> bool:
    """Whether ``name`` is a shortened spelling of an option read here (``--dev 1``), which argparse accepts."""
    return name.startswith("--") and name not in READ_HERE and any(full.startswith(name) for full in READ_HERE)


def start(argv: list[str], subcommands: Collection[str], session: Session) -> None:
    """Fork the workers the command line will want (see planned_workers; ``subcommands``: the names that
    make it something else than a measuring run) into ``session``. Never raises: a head start that cannot
    be had leaves the workers to the runner."""
    threading = sys.modules.get("threading")  # not imported here: no command that measures nothing needs it
    if threading is not None and threading.active_count() != 1:
        return  # a fork is only as clean as a fresh interpreter while no other thread runs
    try:
        for backend, index in planned_workers(argv, subcommands):
            session.started[backend, index] = ForkedWorker(index, backend)
            mark("workers spawned")
    except OSError:
        release(session)


def claim(session: Session, backend: str, indices: tuple[int, ...]) -> dict[int, ForkedWorker]:
    """The workers ``session`` started for ``backend`` and these devices, which the caller now owns."""
    return {i: session.started.pop((backend, i)) for i in indices if (backend, i) in session.started}


def release(session: Session) -> None:
    """End every worker ``session`` started that no run claimed."""
    while session.started:
        _, proc = session.started.popitem()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
