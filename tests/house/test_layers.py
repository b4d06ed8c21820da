"""The layers hold: no module imports a module of a higher layer, and no module-level import cycle.

ruff's per-layer banned-api rules (bisect_smem/<layer>/ruff.toml) stop upward imports at lint time;
this test reads every import by AST, so it also covers the two backend modules that ruff must let
import cupy and numba, and imports hidden inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import PACKAGE

LAYERS = ("core", "devices", "experiments", "analysis", "app")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.split(".")[0] in ("bisect_smem", "cupy", "numba")]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) is not None))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    own = _layer(module)
    upward = [name for name in _imports(MODULES[module])
              if name.startswith("bisect_smem.") and (_layer(name) or 0) > own]
    assert upward == [], f"{module} ({LAYERS[own]}) imports a higher layer: {upward}"


# The app wings, each importing only the wings listed after it: cli > run, outputs > render (run imports
# neither outputs nor render). The pytest plugin stands beside cli and may import what it may.
WINGS = ("cli", "run", "outputs", "render")
WING_MAY_IMPORT = {"cli": {"run", "outputs", "render"}, "run": set(), "outputs": {"render"}, "render": set(),
                   "plugin": {"run", "outputs", "render"}}


def _wing(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["bisect_smem", "app"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in WINGS or parts[2] == "plugin" else None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _wing(m) is not None))
def test_no_app_module_imports_a_wing_above_its_own(module: str) -> None:
    own = _wing(module)
    wrong = [name for name in _imports(MODULES[module])
             if (other := _wing(name)) is not None and other != own and other not in WING_MAY_IMPORT[own]]
    assert wrong == [], f"{module} (app/{own}) imports a wing it may not: {wrong}"


def test_app_is_four_wings_and_the_plugin() -> None:
    app = PACKAGE / "app"
    assert sorted(p.name for p in app.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == sorted((*WINGS, "plugin"))
    assert sorted(p.name for p in app.glob("*.py")) == ["__init__.py"]


def test_render_imports_no_devices() -> None:
    found = {module: [name for name in _imports(path) if name.startswith("bisect_smem.devices")]
             for module, path in MODULES.items() if _wing(module) == "render"}
    assert {m: n for m, n in found.items() if n} == {}


def test_only_the_two_backends_import_cupy_and_numba() -> None:
    users = {module: sorted({name.split(".")[0] for name in _imports(path)} & {"cupy", "numba"})
             for module, path in MODULES.items()}
    assert {m: u for m, u in users.items() if u} == {
        "bisect_smem.devices.backends.cupy.backend": ["cupy"],
        "bisect_smem.devices.backends.numba.backend": ["numba"],
        "bisect_smem.devices.backends.numba.kernels": ["numba"],  # the kernels, imported by numba/backend.py only
    }


# The fit modules name each other for a type (fit_render's Explained): exempt until they no longer do.
CYCLE_EXEMPT = {("bisect_smem.app.fit_render", "bisect_smem.app.cli.fit")}


def test_no_import_cycles() -> None:
    # Every import counts, those inside functions and under TYPE_CHECKING too: a cycle hidden there is one.
    graph = {module: {name for name in _imports(path) if name in MODULES and name != module
                      and (module, name) not in CYCLE_EXEMPT} for module, path in MODULES.items()}
    # A package's __init__ is imported with any of its modules; leave those edges out.
    graph = {m: {n for n in deps if not m.startswith(n + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*trail, module, dep])}")
            if dep not in state:
                visit(dep, [*trail, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_every_layer_package_says_what_lives_there() -> None:
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
        assert doc and "import" in doc, f"bisect_smem/{layer}/__init__.py needs a docstring naming what it may import"


# The argparse builders list every option in one place; splitting them would only scatter the help.
LONG_ALLOWED = {"build_parser"}


def test_no_function_is_longer_than_60_lines() -> None:
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in LONG_ALLOWED:
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long.append(f"{module}.{node.name}: {length} lines")
    assert long == []


def test_files_are_replaced_in_one_place() -> None:
    # core/atomic.py is the one writer that replaces a file; nothing else makes temporary files to rename.
    writers = [module for module, path in MODULES.items() if module != "bisect_smem.core.atomic"
               and any(call in path.read_text() for call in ("os.replace(", "mkstemp(", "os.rename(", "os.link("))]
    assert writers == []


# fit's modules defer project imports without saying why; exempt until they say it or move them up.
DEFERRED_EXEMPT = {"bisect_smem.app.cli.fit", "bisect_smem.app.fit_render"}


def _deferred_without_reason(path: Path) -> list[str]:
    """Imports of the project's own modules below a module's top level with no comment saying why: the
    nearest comment above the import, within its function, must name the import deferred."""
    lines = path.read_text().splitlines()
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in top or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if not any(n.startswith("bisect_smem") for n in names):
            continue
        reason, comment = False, False
        for line in reversed(lines[:node.lineno]):
            if "#" in line:  # the nearest comment, all of its lines
                comment = True
                reason = reason or "deferred" in line.split("#", 1)[1].lower()
            elif comment or line.lstrip().startswith(("def ", "async def ")):
                break
        if not reason:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_project_imports_are_at_the_top_or_say_why_not() -> None:
    found = [where for module, path in MODULES.items() if module not in DEFERRED_EXEMPT
             for where in _deferred_without_reason(path)]
    assert found == []


def test_no_module_is_longer_than_400_lines() -> None:
    long = {module: n for module, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 400}
    assert long == {}
