"""Shared fixtures: the `gpu` marker skips itself without a device; CuPy and numba cache kernels in a temp folder."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device and CuPy are usable here, else why not."""
    from bisect_smem.core.errors import BackendUnavailable
    from bisect_smem.devices.backends.cupy.backend import CupyBackend

    try:
        count = CupyBackend().device_count()
    except BackendUnavailable as exc:
        return str(exc)
    return None if count else "no CUDA device is visible"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cupy-cache"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "numba-cache"))


@functools.cache
def schema_validator(kind: str = "report") -> Any:
    """jsonschema's draft 2020-12 validator for the published schema of ``kind`` (report, fit, baseline),
    checking formats (``date-time``) too."""
    from jsonschema import Draft202012Validator

    from bisect_smem.app.outputs.schema_files import published

    schema = json.loads(published(kind))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@functools.cache
def fast_validator(kind: str = "report") -> Any:
    """fastjsonschema's compiled validator for the same schema: a second, independent implementation, which
    resolves references against the absolute $id and checks date-time by itself."""
    import fastjsonschema

    from bisect_smem.app.outputs.schema_files import published

    return fastjsonschema.compile(json.loads(published(kind)))


def schema_problems(document: dict, kind: str = "report") -> list[str]:
    """What each validator finds wrong with ``document`` against the published schema (empty: valid)."""
    import fastjsonschema

    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in schema_validator(kind).iter_errors(document)]
    try:
        fast_validator(kind)(document)
    except fastjsonschema.JsonSchemaValueException as refused:
        problems.append(f"fastjsonschema: {refused.message}")
    return problems


def assert_valid(document: dict, kind: str = "report") -> None:
    """Fail, listing every problem jsonschema and fastjsonschema find, when ``document`` does not match the
    published schema."""
    problems = schema_problems(document, kind)
    assert problems == [], f"not a valid {kind}: " + "; ".join(problems[:10])


def run_cli_json(args: list[str], folder: Path, capsys: pytest.CaptureFixture[str],
                 name: str = "r.json") -> tuple[int, dict]:
    """Run the tool through ``main`` with ``--json`` into ``folder``; its exit code and the parsed report,
    which must match the published schema, and whose ``exit_code`` must be the process's."""
    from bisect_smem.app.cli import main as cli

    out = folder / name
    code = cli.main([*args, "--json", str(out), "--quiet"])
    capsys.readouterr()
    report = json.loads(out.read_text())
    assert_valid(report)
    assert report["exit_code"] == code, (report["exit_code"], code)
    return code, report


@pytest.fixture
def h200_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A baseline folder saved from a simulated H200's standard run."""
    from bisect_smem.app.cli.main import main

    folder = tmp_path / "baselines"
    assert main(["--simulate", "h200", "--save-baseline", str(folder), "--quiet", "--inline"]) == 0
    capsys.readouterr()
    return folder


@pytest.fixture
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough for every line whole, for tests that read a line of text by its content (a
    path, then what deviates); in a narrower one it wraps (tests/cli/test_text_width.py checks that it does)."""
    monkeypatch.setenv("COLUMNS", "1000")


def consumer_tool(name: str, installed_by: str) -> str:
    """The path of a consumer's own tool (promtool, shellcheck, zsh, lexgrog) that a test runs: without it the
    test skips, except on CI, where `make test` installs it and its absence is a failure."""
    tool = shutil.which(name)
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} must run on CI: {installed_by}")
        pytest.skip(f"{name} is not installed ({installed_by})")
    return tool


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the tool through ``main``: its exit code, stdout and stderr."""
    from bisect_smem.app.cli.main import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error(err: str) -> str:
    """The one ``error:`` line that ``err`` must be, without a traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def set_optin(measured: dict[str, Any], value: int | None) -> dict[str, Any]:
    """A report's ``measured`` with its opt-in ceiling set as a measurement sets it: the reference split's
    ceiling with it (one search gives both, and every reader holds them equal)."""
    from bisect_smem.core.levels import is_reference_split  # deferred: conftest imports the tool lazily

    measured["optin_dynamic_ceiling_bytes"] = value
    for split in measured.get("static_splits") or ():
        if is_reference_split(split["static_bytes"], split["threads"]):
            split["dynamic_ceiling_bytes"] = value
    return measured
