"""The published JSON Schemas, checked by jsonschema itself: they are valid draft 2020-12 documents,
generated from the model (the files are what the generator makes now), every report the tool writes
validates (every profile at every level, replays, the real H200 report, baselines, fit results), and
crafted bad documents are rejected. Every report of tests/conftest.py's run_cli_json (the fault runs
among them) is validated there too."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.outputs.schema_files import KINDS, file_name, published
from bisect_smem.app.outputs.schemas import generated, text
from bisect_smem.core.json_schema import generate
from bisect_smem.core.jsonable import to_jsonable
from bisect_smem.core.levels import LEVELS
from bisect_smem.core.profiles import PROFILES
from tests.conftest import assert_valid, fast_validator, run_cli_json, schema_problems, schema_validator
from tests.paths import H200_REPORT

# The test extra installs jsonschema; a GPU image without it still collects the other tests.
Draft202012Validator = pytest.importorskip("jsonschema").Draft202012Validator
fastjsonschema = pytest.importorskip("fastjsonschema")



@pytest.mark.parametrize("kind", KINDS)
def test_each_schema_is_valid_draft_2020_12_and_is_what_the_model_generates(kind: str) -> None:
    schema = json.loads(published(kind))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    version = file_name(kind).split(".")[1]  # report.v1.json: v1
    assert schema["$id"] == f"urn:bisect-smem:{kind}:{version}"  # absolute, as draft 2020-12 wants
    assert '"type": [' not in published(kind), "a union type list, which Ajv's strict mode refuses"
    assert published(kind) == text(generated()[kind]), f"bisect_smem/schemas/{file_name(kind)} drifted: make generated"


@pytest.mark.parametrize("kind", KINDS)
def test_the_schema_command_prints_the_published_schema(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema", kind]) == 0
    assert capsys.readouterr().out == published(kind)


def test_the_schema_command_defaults_to_the_report_and_refuses_an_unknown_kind(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$id"] == "urn:bisect-smem:report:v1"
    assert cli.main(["schema", "fleet"]) == 2
    assert capsys.readouterr().err.startswith("error: argument kind: invalid choice: 'fleet'")


@dataclass(frozen=True)
class _Inner:
    """An inner part."""

    size_bytes: int


@dataclass(frozen=True)
class _Outer:
    """The whole."""

    name: str
    inner: _Inner
    pair: tuple[int, int] | None
    parts: tuple[_Inner, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    note: str | None = None


def test_the_generator_follows_the_dataclasses() -> None:
    schema = generate(_Outer, "test/outer/v1", "outer")
    assert schema["required"] == ["name", "inner"]  # no default and not nullable
    assert schema["properties"]["pair"]["anyOf"][0]["prefixItems"] == [{"type": "integer"}] * 2
    assert schema["$defs"]["_Inner"] == {"type": "object", "properties": {"size_bytes": {"type": "integer", "minimum": 0}},
                                         "required": ["size_bytes"], "description": "An inner part.",
                                         "additionalProperties": False}
    assert schema["properties"]["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    validator = Draft202012Validator(schema)
    good = to_jsonable(_Outer("a", _Inner(1), (1, 2), (_Inner(3),), {"x": 0.5}))
    assert list(validator.iter_errors(good)) == []
    for bad in ({**good, "inner": {"size_bytes": True}}, {**good, "pair": [1]}, {**good, "scores": {"x": "1"}},
                {k: v for k, v in good.items() if k != "inner"}, {**good, "parts": [{}]},
                {**good, "inner": {"size_bytes": -1}}, {**good, "inner": {"size_bytes": 1, "sise_bytes": 1}}):
        assert list(validator.iter_errors(bad)), bad


def test_every_profile_at_every_level_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for level in LEVELS:
        args = [a for p in PROFILES for a in ("--simulate", p.key)]
        code, report = run_cli_json([*args, "--level", level], tmp_path, capsys, f"{level}.json")
        assert code == 0 and len(report["devices"]) == len(PROFILES) and report["level"] == level


@pytest.mark.parametrize("level", ["quick", "standard"])
def test_replays_and_the_real_h200_report_validate(level: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert_valid(json.loads(H200_REPORT.read_text()))
    code, report = run_cli_json(["--simulate", str(H200_REPORT), "--level", level], tmp_path, capsys)
    assert code == 0 and report["devices"][0]["context"]["replayed_from"] == str(H200_REPORT)


def test_baselines_validate(tmp_path: Path) -> None:
    assert cli.main(["--simulate", "h200", "--simulate", "rtx-pro-6000", "--save-baseline", str(tmp_path),
                     "--quiet"]) == 0
    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == 2
    for path in files:
        assert_valid(json.loads(path.read_text()), "baseline")


@pytest.mark.parametrize("args", [
    ["110592", "--no-local"],
    ["64K", "--static", "16K", "--threads", "256", "--simulate", "h200"],
    ["--tile", "128x256x64", "--tile", "128x128x64", "--dtype", "bf16", "--stages", "auto", "--no-local"],
    ["--explain", "out of resource: shared memory, Required: 131072, Hardware limit: 101376",
     "--tile", "128x128x64", "--dtype", "fp16", "--no-local"],
    ["100K", "--target", str(H200_REPORT)],
], ids=["bytes", "static-local", "tiles-auto", "explain", "target"])
def test_fit_results_validate(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["fit", *args, "--json", "-"])
    assert_valid(json.loads(capsys.readouterr().out), "fit")


def _report() -> dict:
    report = json.loads(H200_REPORT.read_text())
    report.update(result="pass", exit_code=0, error=None)
    report["devices"][0]["summary"] = {"status": "pass", "counts": {"match": 1}, "reason": None}
    return report


def _set(path: str, value: object) -> dict:
    doc = copy.deepcopy(_report())
    *parents, last = path.split(".")
    target = doc
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is _DROP:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return doc


_DROP = object()
BAD = {
    "schema-name": ("schema", "bisect_smem/report/v2"),
    "schema-missing": ("schema", _DROP),
    "devices-missing": ("devices", _DROP),
    "index-bool": ("devices.0.index", True),
    "cc-number": ("devices.0.compute_capability", 9.0),
    "verdict-word": ("devices.0.verdicts.0.verdict", "ok"),
    "kind-word": ("devices.0.verdicts.0.kind", "hint"),
    "level-word": ("level", "fast"),
    "status-word": ("devices.0.summary.status", "ok"),
    "status-missing": ("devices.0.summary.status", _DROP),
    "count-string": ("devices.0.summary.counts.match", "1"),
    "result-word": ("result", "ok"),
    "exit-code-5": ("exit_code", 5),
    "range-of-three": ("devices.0.measured.carveout.0.carveout_range_bytes", [1, 2, 3]),
    "ceiling-string": ("devices.0.measured.optin_dynamic_ceiling_bytes", "232448"),
    "probes-float": ("devices.0.measured.static_splits.0.probes", 2.5),
    # The nonsense the schemas used to accept:
    "misspelled-key": ("devices.0.measured.optin_dynamic_ceilling_bytes", 232448),
    "misspelled-top-key": ("creatd_utc", "2026-11-30T14:18:14+00:00"),
    "created-yesterday": ("created_utc", "yesterday"),
    "negative-ceiling": ("devices.0.measured.optin_dynamic_ceiling_bytes", -5),
    "negative-granule": ("devices.0.measured.allocation_granularity_bytes", -128),
    "pass-with-exit-1": ("exit_code", 1),
    "fail-with-exit-0": ("result", "fail"),
}


def test_a_good_document_is_accepted() -> None:
    assert schema_problems(_report()) == []


@pytest.mark.parametrize("name", sorted(BAD))
def test_crafted_bad_documents_are_rejected(name: str) -> None:
    path, value = BAD[name]
    assert list(schema_validator().iter_errors(_set(path, value))), f"{name} was accepted by jsonschema"
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fast_validator()(_set(path, value))


@pytest.mark.parametrize(("result", "code"), [("pass", 0), ("fail", 1), ("bad_input", 2), ("no_gpu", 3),
                                              ("incomplete", 4), (None, None)])
def test_each_result_with_its_own_exit_code_is_accepted(result: str | None, code: int | None) -> None:
    doc = _set("result", result)
    doc["exit_code"] = code
    assert schema_problems(doc) == []
    doc["exit_code"] = 4 if code != 4 else 0
    assert len(schema_problems(doc)) == 2  # both validators refuse a result that is not its exit code's


def test_both_validators_check_the_date_time_format() -> None:
    # jsonschema checks date-time only with rfc3339-validator installed (the test extra has it).
    problems = schema_problems(_set("created_utc", "2026-11-30"))
    assert len(problems) == 2 and problems[1].startswith("fastjsonschema"), problems
