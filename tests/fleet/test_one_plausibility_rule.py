"""One plausibility rule per quantity, read from its declaration: every reader of a report refuses the same
values with one line and exit 2 (merge, replay, fit --target, check, export), the published schema
states the same range, and fit's limits are the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.analysis.fit.measured import measured_target
from bisect_smem.app.outputs.schemas import report_schema
from bisect_smem.core.quantities import OPTIN_CEILING, declared
from tests.conftest import one_error, run_main, set_optin
from tests.paths import H200_REPORT


def _with_optin(tmp_path: Path, value: Any) -> Path:
    report = json.loads(H200_REPORT.read_text())
    report["devices"][0]["measured"]["optin_dynamic_ceiling_bytes"] = value
    path = tmp_path / f"optin-{value}.json"
    path.write_text(json.dumps(report))
    return path


READERS = {  # merge alone: beside readable reports, a bad one is a row of its own (test_merge_survives.py)
    "merge": lambda p: ["merge", str(p)],
    "replay": lambda p: ["--simulate", str(p), "--level", "quick", "--inline"],
    "fit --target": lambda p: ["fit", "100K", "--target", str(p)],
    "export prom": lambda p: ["export", "prom", str(p)],
    "export nfd": lambda p: ["export", "nfd", str(p)],
}


@pytest.mark.parametrize("value", [0, 100, 1023, 1 << 25], ids=["0", "100 B", "1023 B", "32 MiB"])
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_every_reader_refuses_an_impossible_opt_in(reader: str, value: int, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(READERS[reader](_with_optin(tmp_path, value)), capsys)
    assert code == 2, (out, err)
    line = one_error(err)
    assert "optin_dynamic_ceiling_bytes" in line and str(value) in line, line


@pytest.mark.parametrize("value", [0, 100])
def test_check_refuses_it_too(value: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(["check", str(_with_optin(tmp_path, value))], capsys)
    assert code == 2 and out.startswith("smem UNKNOWN: "), out


def test_an_opt_in_below_the_default_ceiling_is_refused_by_every_reader(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _with_optin(tmp_path, 40960)  # within the bounds, below the 49152 B the same device measured
    for reader, args in READERS.items():
        code, _out, err = run_main(args(path), capsys)
        assert code == 2 and "default_dynamic_ceiling_bytes" in one_error(err), reader


def _numeric(prop: dict) -> dict:
    """The branch of a property that holds its number (a nullable count is anyOf an integer and null)."""
    return next((s for s in prop.get("anyOf", [prop]) if s.get("type") in ("integer", "number")), prop)


def test_the_schema_states_each_declared_range() -> None:
    defs = report_schema()["$defs"]
    for q in declared("measured"):
        prop = defs["Measured"]["properties"].get(q.name)
        if prop is not None:
            assert (_numeric(prop)["minimum"], _numeric(prop)["maximum"]) == q.bounds, q.name
    for q in declared("reported"):
        prop = _numeric(defs["DriverAttributes"]["properties"][q.name])
        assert (prop["minimum"], prop["maximum"]) == q.bounds, q.name


@pytest.mark.parametrize("value", [OPTIN_CEILING.bounds[0], OPTIN_CEILING.bounds[1]])
def test_fit_accepts_the_declared_range_at_its_ends(value: int, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(H200_REPORT.read_text())
    set_optin(report["devices"][0]["measured"], value)["default_dynamic_ceiling_bytes"] = 1024
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(report))
    code, out, err = run_main(["fit", "1024", "--target", str(path)], capsys)
    assert code == 0, (out, err)


@pytest.mark.parametrize("value", [0, 100, 1 << 25])
def test_fit_holds_a_device_measured_now_to_the_same_rule(value: int) -> None:
    from bisect_smem.core.errors import UsageError
    from bisect_smem.core.model import DeviceReport, Measured

    dev = DeviceReport(0, "GPU", "9.0", measured=Measured(optin_dynamic_ceiling_bytes=value))
    with pytest.raises(UsageError, match=rf"optin_dynamic_ceiling_bytes must be an integer in "
                                         rf"{OPTIN_CEILING.bounds[0]}\.\.{OPTIN_CEILING.bounds[1]} \(got {value}\)"):
        measured_target(dev)


@pytest.mark.parametrize("value", [None, 204800], ids=["null", "another value"])
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_an_opt_in_that_is_not_its_reference_split_is_refused(reader: str, value: int | None, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(READERS[reader](_with_optin(tmp_path, value)), capsys)
    assert code == 2, (out, err)
    assert f"must be the ceiling of the reference split, static_splits with 0 B static and 128 threads (232448) " \
           f"(got {value})" in one_error(err)
