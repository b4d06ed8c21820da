"""One writer: every file the tool writes (reports, baselines, metrics, feature files, exports, plots, the
report written on failure) goes out through app/outputs (a Delivery, then the atomic writer). No module
outside app/outputs opens a file for writing, read by AST: ``open`` or ``Path.open`` with a mode that
writes, ``os.open`` with a flag that writes, ``Path.write_text``/``write_bytes``, a temporary file
(``mkstemp``), ``replace_atomically``, and the writer's ``write_atomic``. What is written that is no output of the tool is named below, each
with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import PACKAGE

WRITE_MODES = set("wax+")
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}

# Files that are not the tool's outputs, so not a Delivery's: each is written where it must be by what it is.
NOT_OUTPUTS = {
    # The atomic writer itself, which outputs/writer.py calls for every regular file.
    "core/atomic.py": "the atomic writer",
    # Every process of a run appends a line for a person timing it (BISECT_SMEM_TIMELINE): one file that
    # several processes append to cannot be replaced whole.
    "app/run/timeline.py": "the timeline, appended by every process",
    # trace's own folder: the claim that marks it the tool's, the notices the collector sends, and the
    # limits it was explained against; the collector's JSON lines are the traced command's, not outputs.
    "app/run/trace_folder.py": "the trace folder's claim",
    "app/run/notices.py": "the trace folder's notices",
    "app/run/traced.py": "the controlling terminal, handed to the traced command",
    "devices/collector/fallback/sitecustomize.py": "the collector's JSON lines, in the traced process",
    # Caches the tool keeps for itself: a built collector, compiled probe kernels and the lock around them.
    "devices/collector/build.py": "the built collector, cached",
    "devices/nvrtc.py": "compiled kernels, cached, and their lock",
    # The simulator's stand-in for the shared memory one process leaves to the next (--level full).
    "devices/backends/sim/memory.py": "the simulated leftovers between processes",
}

# Commands whose files still go to the writer without a Delivery: none now; a new one is listed here only
# on its way to a Delivery.
NOT_YET_DELIVERED: set[str] = set()  # a command still writing a file itself, until it hands it to a Delivery


def _text(node: ast.expr | None) -> str:
    """The source words of a mode or flags argument: a string's value, or the names it is built of."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return " ".join(n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
                    if isinstance(n, ast.Attribute | ast.Name))


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def writes(source: str) -> list[str]:
    """Each place in ``source`` that opens or replaces a file for writing, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = _text(func.value) if isinstance(func, ast.Attribute) else ""
        if name == "open" and owner == "os":
            if WRITE_FLAGS & set(_text(_argument(node, 1, "flags")).split()):
                found.append(f"{node.lineno}: os.open for writing")
        elif name == "open" and isinstance(func, ast.Name):
            # open(path, mode): a mode that is not a plain string is counted as writing
            mode = _argument(node, 1, "mode")
            if mode is not None and (not isinstance(mode, ast.Constant) or WRITE_MODES & set(_text(mode))):
                found.append(f"{node.lineno}: open({_text(mode)!r})")
        elif name == "open":
            # Path.open(mode); another object's open (a backend opening a device) takes no mode string
            mode = _argument(node, 0, "mode")
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and WRITE_MODES & set(mode.value):
                found.append(f"{node.lineno}: .open({mode.value!r})")
        elif name in ("write_text", "write_bytes", "mkstemp", "replace_atomically", "write_atomic"):
            found.append(f"{node.lineno}: {name}")
    return found


def test_the_scan_finds_each_way_of_writing() -> None:
    source = ("open(p, 'w')\nopen(p, mode='ab')\nPath(p).open('x')\nos.open(p, os.O_WRONLY | os.O_CREAT)\n"
              "p.write_text('')\np.write_bytes(b'')\nreplace_atomically(p, b'')\nwriter.write_atomic(p, '')\n"
              "tempfile.mkstemp()\nopen(p, mode)\n"
              "open(p)\nopen(p, 'rb')\nos.open(p, os.O_RDONLY)\np.read_text()\nbackend.open(index, sizes)\n")
    assert [line.split(":")[0] for line in writes(source)] == [str(n) for n in range(1, 11)]


def test_no_module_outside_outputs_opens_a_file_for_writing() -> None:
    writing = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("app/outputs/") or name in NOT_OUTPUTS or name in NOT_YET_DELIVERED:
            continue
        found = writes(path.read_text())
        if found:
            writing[name] = found
    assert writing == {}


def test_each_exception_still_writes() -> None:
    # An exception that no longer writes anything is taken off the list, so the list stays the truth.
    idle = [name for name in {**NOT_OUTPUTS, **dict.fromkeys(NOT_YET_DELIVERED)}
            if not writes(Path(PACKAGE, name).read_text())]
    assert idle == []


def test_the_writer_is_called_by_outputs_alone() -> None:
    # Outside app/outputs a command hands its files to a Delivery, which checks and writes them in order.
    calling = [path.relative_to(PACKAGE).as_posix() for path in sorted((PACKAGE / "app").rglob("*.py"))
               if "write_atomic(" in path.read_text() and not path.is_relative_to(PACKAGE / "app" / "outputs")]
    assert set(calling) <= NOT_YET_DELIVERED
