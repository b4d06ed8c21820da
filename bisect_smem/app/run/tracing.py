"""A traced run from start to end: the environment the command's processes get (the collector, and the libcupti
it loads, chosen before anything is claimed, so that what would refuse the command is said first), the trace
folder claimed, the limits of the GPU it runs on found and kept beside the trace, and the command run with
the collectors' notices listened for (traced.py runs it; notices.py listens)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bisect_smem.analysis.fit.measured import measured_target
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.app.run import fit_targets, notices, trace_folder
from bisect_smem.app.run.traced import run_traced
from bisect_smem.core.environment import COLLECTOR as COLLECTOR_CHOICE
from bisect_smem.core.environment import INJECTION
from bisect_smem.core.errors import CommandNotStarted, TraceUnavailable, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.collector import build, libcupti
from bisect_smem.devices.collector.environment import NOTIFY, TRACE_DIR


@frozen
class HereAsked:
    """Where the limits of the GPU the command runs on come from: ``--report``, ``--simulate``, or a quick
    measurement now (``measure``); none of them: no limits."""

    report: str | None
    simulate: tuple[str, ...]
    measure: bool


@frozen
class Collector:
    """What goes into the command's environment for the collector, and the line that says which libcupti it
    loads and why."""

    environment: dict[str, str]
    libcupti: str


@frozen
class Traced:
    """A command that ran traced: the folder its trace is in, the limits it is explained against (and a note
    on them), and its exit code (128+N where signal N ended it)."""

    folder: Path
    here: Target | None
    note: str | None
    exit_code: int


def run_command(command: tuple[str, ...], out: Path | None, asked: HereAsked, say: Callable[[str], None]) -> Traced:
    """Run ``command`` traced into ``out`` (None: a new numbered folder); ``say`` tells the person which
    libcupti the collector loads, before the command's own output. What would refuse the command (a UsageError,
    TraceUnavailable) is raised before the folder is claimed or anything measured; a command that could not
    be started (CommandNotStarted) leaves the folder as it was, so the same ``out`` may be given again."""
    collector = collector_environment(command)
    claimed = trace_folder.claim(out, command)
    try:
        here, note = here_limits(asked)
        if here is not None:
            trace_folder.record_limits(claimed, here)
    except BaseException:
        claimed.release()
        raise
    try:
        with notices.Listener(claimed.path) as listener:
            env = {**collector.environment, TRACE_DIR: str(claimed.path),
                   **({NOTIFY: listener.name} if listener.name else {})}
            say(f"bisect-smem trace: {collector.libcupti}")
            code = run_traced(command, env, alongside=listener.receiving())
    except CommandNotStarted:
        claimed.release()  # nothing ran in it
        raise
    return Traced(claimed.path, here, note, code)


def here_limits(asked: HereAsked) -> tuple[Target | None, str | None]:
    """The limits of the GPU the command runs on, and a note on them: ``--report``'s first device, a simulated
    device, or the local GPU measured now (before the command: the tool never measures inside it)."""
    if asked.report:
        here = fit_targets.file_targets(asked.report, "--report")[0]  # the GPU the command runs on is the report's first
        model = (here.short or "").replace(here.driver_version or "\0", "").strip()
        return replace(here, short=model or here.short), None
    if not asked.simulate and not asked.measure:
        return None, None
    devices, note = fit_targets.local_devices(asked.simulate, True)
    if not devices:
        return None, note
    return replace(measured_target(devices[0]), short=devices[0].name), note


def collector_environment(command: tuple[str, ...]) -> Collector:
    """The command's environment: the tool's, with the collector and libcupti named (the trace folder and the
    notify socket are added once claimed). The C collector goes in through CUDA_INJECTION64_PATH; where none can
    be built (no compiler, or BISECT_SMEM_COLLECTOR=python), a Python command gets the ctypes one through
    PYTHONPATH. A UsageError where another tool injects itself already; TraceUnavailable where no collector can
    run."""
    if os.environ.get(INJECTION):
        raise UsageError(f"{INJECTION} is already set ({os.environ[INJECTION]}): another tool injects itself into "
                         "CUDA processes; trace does not run the command untraced: unset it, or run without trace")
    choice = libcupti.choose([*libcupti.command_site_packages(command), *sys.path])
    if choice.found is None:
        raise TraceUnavailable(choice.says)
    env = {**os.environ, libcupti.OVERRIDE: choice.found.path}
    try:
        if os.environ.get(COLLECTOR_CHOICE) == "python":
            raise build.CollectorBuildError(f"{COLLECTOR_CHOICE}=python")
        return Collector({**env, INJECTION: str(build.collector_library())}, choice.says)
    except build.CollectorBuildError as exc:
        if not is_python(command):
            raise TraceUnavailable(f"the collector cannot be built ({exc}): install a C compiler (cc); without one "
                                   "only Python commands are traced") from None
    fallback = str(build.SOURCE_DIR / "fallback")
    return Collector({**env, "PYTHONPATH": os.pathsep.join(filter(None, [fallback, os.environ.get("PYTHONPATH")]))},
                     choice.says)


def is_python(command: tuple[str, ...]) -> bool:
    """A Python interpreter, or a script whose first line names one: what the ctypes collector can trace."""
    if "python" in Path(command[0]).name:
        return True
    found = shutil.which(command[0])
    try:
        with open(found or command[0], "rb") as script:
            return script.read(2) == b"#!" and b"python" in script.readline()
    except OSError:
        return False
