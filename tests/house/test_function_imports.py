"""Imports inside functions are few and each says why: the tool defers an import only where its start-up
or an optional library needs it, and the count of such imports over the whole package is capped."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import PACKAGE

# The most imports inside functions the package may hold (the anchors hold 0 to 35).
LIMIT = 30


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def function_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``path`` that run inside a function (not those only a type checker reads)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                found.append(child)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(path.read_text()), False)
    return found


def _says_why(lines: list[str], node: ast.Import | ast.ImportFrom) -> bool:
    """Whether the import's own line, or the nearest comment above it within its function, names it deferred."""
    if "#" in lines[node.lineno - 1] and "deferred" in lines[node.lineno - 1].split("#", 1)[1].lower():
        return True
    comment = False
    for line in reversed(lines[:node.lineno - 1]):
        if "#" in line:
            comment = True
            if "deferred" in line.split("#", 1)[1].lower():
                return True
        elif comment or line.lstrip().startswith(("def ", "async def ")):
            return False
    return False


def _every() -> list[tuple[Path, ast.Import | ast.ImportFrom]]:
    return [(path, node) for path in sorted(PACKAGE.rglob("*.py")) for node in function_imports(path)]


def test_the_scan_finds_imports_in_functions_and_methods_only(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import json\n"
                      "def f():\n    import re  # deferred: a reason\n    if True:\n        from re import sub\n"
                      "class C:\n    def m(self):\n        import sys\n        return sys\n")
    assert [node.lineno for node in function_imports(sample)] == [6, 8, 11]
    lines = sample.read_text().splitlines()
    assert [_says_why(lines, node) for node in function_imports(sample)] == [True, True, False]


def test_every_import_inside_a_function_says_why() -> None:
    silent = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for path, node in _every()
              if not _says_why(path.read_text().splitlines(), node)]
    assert silent == []


def test_imports_inside_functions_are_at_most_the_limit() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for path, node in _every()]
    assert len(found) <= LIMIT, f"{len(found)} imports inside functions (at most {LIMIT}): {found}"
