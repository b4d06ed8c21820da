"""merge, profiles and check write JSON with ``--json PATH`` or ``--json -``, as fit and trace do: each
document validates against its published schema (jsonschema and fastjsonschema), says what the text says
(check's verdict, line and exit code are the ones it prints; merge's exit code is the process's), and a
path that cannot be written is refused before any work, in one line."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.render.check import CHECK_VERDICTS
from bisect_smem.core.profiles import PROFILES
from tests.conftest import assert_valid, schema_problems
from tests.paths import H200_FULL, H200_REPORT

pytest.importorskip("jsonschema")
pytest.importorskip("fastjsonschema")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, doc: dict) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def h200() -> dict:
    return json.loads(H200_REPORT.read_text())


def with_optin(doc: dict, optin: int) -> dict:
    """The report with its measured opt-in ceiling (and the split that gives it) moved to ``optin``."""
    doc = copy.deepcopy(doc)
    measured = doc["devices"][0]["measured"]
    measured["optin_dynamic_ceiling_bytes"] = optin
    for split in measured["static_splits"]:
        if split["static_bytes"] == 0 and split["threads"] == 128:
            split["dynamic_ceiling_bytes"] = optin
    return doc


def test_profiles_json_lists_every_row_with_every_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["profiles", "--json", "-"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "bisect_smem/profiles/v1"
    assert_valid(doc, "profiles")
    assert [(p["key"], tuple(p["compute_capability"]), p["max_smem_per_block_optin_bytes"], p["confirmed"])
            for p in doc["profiles"]] == [(p.key, p.compute_capability, p.max_smem_per_block_optin_bytes, p.confirmed)
                                          for p in PROFILES]
    # A file gets the same document, and stdout keeps the table.
    code, text, _ = run(["profiles", "--json", str(tmp_path / "p.json")], capsys)
    assert code == 0 and json.loads((tmp_path / "p.json").read_text()) == doc and text.startswith("profile")


def test_merge_json_carries_the_groups_deviations_and_exit_code(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / f"n{i}.json", h200()) for i in range(2)]
    low = write(tmp_path / "low.json", with_optin(h200(), 101376))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    empty = write(tmp_path / "empty.json", {**h200(), "devices": [], "result": "no_gpu", "exit_code": 3,
                                            "error": "no usable GPU: no NVIDIA driver found"})
    code, out, _ = run(["merge", *paths, low, str(bad), empty, "--json", "-"], capsys)
    doc = json.loads(out)
    assert_valid(doc, "merge")
    assert code == doc["exit_code"] == 1
    [group] = doc["groups"]
    assert len(group["members"]) == 3 and group["majority"]["measured.optin_dynamic_ceiling_bytes"] == 232448
    assert {d["name"]: (d["value"], d["majority"]) for d in group["deviations"][f"{low}:0"]}[
        "measured.optin_dynamic_ceiling_bytes"] == (101376, 232448)
    assert [u["path"] for u in doc["unreadable"]] == [str(bad)]
    assert doc["unmeasured"] == [{"path": empty, "no_gpu": True, "why": "no usable GPU: no NVIDIA driver found"}]
    code, text, _ = run(["merge", *paths, "--json", str(tmp_path / "m.json")], capsys)
    written = json.loads((tmp_path / "m.json").read_text())
    assert code == written["exit_code"] == 0 and text.startswith("GPU model") and written["groups"][0]["deviations"] == {}


def test_merge_json_is_strict_json_where_a_report_holds_nan(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    docs = [h200(), h200()]
    docs[1]["devices"][0]["reported"]["driver"]["vendor_field"] = float("nan")
    docs[0]["devices"][0]["reported"]["driver"]["vendor_field"] = 1
    paths = [write(tmp_path / f"n{i}.json", d) for i, d in enumerate([*docs, docs[0]])]
    code, out, _ = run(["merge", *paths, "--json", "-"], capsys)
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert code == 1 and doc["groups"][0]["deviations"][f"{paths[1]}:0"][0]["value"] == "nan"
    assert_valid(doc, "merge")


def _reports(tmp_path: Path) -> dict[str, Path]:
    """Reports the check reads as each of its verdicts that a file can give."""
    mismatch = tmp_path / "mismatch.json"
    assert main(["--simulate", "h200,optin=204800", "--level", "quick", "--inline", "--quiet",
                 "--json", str(mismatch)]) == 1  # a device whose opt-in limit is below its reported one
    no_gpu = {**h200(), "devices": [], "result": "no_gpu", "exit_code": 3, "error": "no usable GPU: no driver"}
    (tmp_path / "garbled.json").write_text("{")
    return {"ok": H200_REPORT, "ok-full": H200_FULL, "no_gpu": Path(write(tmp_path / "no-gpu.json", no_gpu)),
            "unknown": tmp_path / "missing.json", "mismatch": mismatch, "garbled": tmp_path / "garbled.json"}


@pytest.mark.parametrize("max_age", [None, "60"])
def test_check_json_says_what_the_line_says(tmp_path: Path, max_age: str | None,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    age = ["--max-age", max_age] if max_age else []  # the committed reports are old: stale with --max-age
    seen = set()
    reports = _reports(tmp_path)
    capsys.readouterr()
    for name, path in reports.items():
        code, line, _ = run(["check", str(path), *age], capsys)
        json_code, out, _ = run(["check", str(path), *age, "--json", "-"], capsys)
        doc = json.loads(out)
        assert_valid(doc, "check")
        # The two runs are apart in time: a stale report's age may tick over a second between them.
        same_age = re.compile(r"\d+ s old")
        assert (json_code, doc["exit_code"], same_age.sub("N s old", doc["line"] + "\n"), doc["report"]) == \
            (code, code, same_age.sub("N s old", line), str(path)), name
        assert line.lower().startswith(f"smem {doc['verdict'].replace('_', ' ')}"), (name, line)
        assert CHECK_VERDICTS[doc["verdict"]] == code
        seen.add(doc["verdict"])
    # With --max-age the committed reports are stale; the one measured now is not.
    assert seen == ({"stale", "unknown", "mismatch"} if max_age else {"ok", "no_gpu", "unknown", "mismatch"}), seen


def test_the_check_schema_ties_each_verdict_to_its_exit_code() -> None:
    good = {"schema": "bisect_smem/check/v1", "report": "r.json", "verdict": "ok", "exit_code": 0,
            "line": "smem ok: 1 GPU, opt-in 232448 B"}
    assert schema_problems(good, "check") == []
    assert schema_problems({**good, "exit_code": 2}, "check")  # ok is never exit 2
    assert schema_problems({**good, "line": "x" * 81}, "check")  # the line is at most 80 bytes
    assert schema_problems({**good, "verdict": "fine"}, "check")


@pytest.mark.parametrize("command", [["profiles"], ["check", str(H200_REPORT)], ["merge", str(H200_REPORT)]])
def test_a_json_path_that_cannot_be_written_is_refused_first(command: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*command, "--json", str(tmp_path / "no-such-folder" / "x.json")], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: cannot write")
    code, _, err = run([*command, "--json", "a.json", "--json", "b.json"], capsys)
    assert code == 2 and "--json was given twice" in err
