"""Files the tool reads: one schema check for reports and baselines (a wrongly typed field names the
file and the field), quantities missing on either side count as differences, and merge labels by
path, refuses duplicates, reports ties and stays right at fleet size."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.render.baselines import regression_line
from bisect_smem.core.quantities import Regression, compare_quantities
from tests.conftest import set_optin
from tests.paths import ROOT

# These tests read lines whole: a path, then what deviates or regressed.
pytestmark = pytest.mark.usefixtures("wide_terminal")


@pytest.fixture(scope="module")
def h200_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("tpl") / "h200.json"
    assert main(["--simulate", "h200", "--quiet", "--json", str(path)]) == 0
    return json.loads(path.read_text())


@pytest.fixture
def saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    folder = tmp_path / "b"
    assert main(["--simulate", "h200", "--save-baseline", str(folder)]) == 0
    capsys.readouterr()
    return folder


def edit_baseline(folder: Path, edit) -> Path:
    (path,) = folder.rglob("*.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["device"].update(compute_capability=9.0), "device.compute_capability"),
    (lambda d: d["device"]["measured"].update(residency="x"), "device.measured.residency"),
    (lambda d: d["device"]["measured"]["residency"][0].update(threads="128"), "device.measured.residency[0].threads"),
    (lambda d: d["device"]["measured"].update(optin_dynamic_ceiling_bytes=True),
     "device.measured.optin_dynamic_ceiling_bytes"),
    (lambda d: d["provenance"].update(driver_version=600), "provenance.driver_version"),
    (lambda d: d.update(device=[]), "device"),
])
def test_a_wrongly_typed_baseline_names_file_and_field(saved: Path, edit, field: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = edit_baseline(saved, edit)
    code = main(["--simulate", "h200", "--compare", str(saved)])
    err = capsys.readouterr().err
    assert code == 2 and "no baseline" not in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"error: {path}: field {field} "), err


@pytest.mark.parametrize("section", ["residency", "carveout", "static_splits"])
def test_entries_removed_from_a_baseline_are_regressions(saved: Path, section: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    edit_baseline(saved, lambda d: d["device"]["measured"].update({section: []}))
    code = main(["--simulate", "h200", "--compare", str(saved)])
    out = capsys.readouterr().out
    assert code == 1 and ", 0 regressed" not in out and "not in the baseline" in out


def test_a_quantity_on_one_side_only_is_a_difference() -> None:
    assert regression_line(Regression.between("q", {"q": 1}, {})) == "q: not in the baseline, now 1"
    assert regression_line(Regression.between("q", {}, {"q": 1})) == "q: baseline 1, not measured now"
    assert [c.name for c in compare_quantities({"a": 1}, {"b": 2})] == ["a", "b"]
    assert all(r.fails for r in compare_quantities({"a": 1}, {"b": 2}))
    assert not Regression.between("q", {"q": None}, {"q": None}).fails and Regression.between("q", {"q": 1},
                                                                                              {"q": 2}).fails


def write(path: Path, doc: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return str(path)


def with_optin(doc: dict, optin: int) -> dict:
    doc = copy.deepcopy(doc)
    set_optin(doc["devices"][0]["measured"], optin)
    return doc


def test_merge_labels_by_path_so_same_names_do_not_collide(h200_report: dict, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / "a" / "x.json", h200_report), write(tmp_path / "b" / "x.json", h200_report),
             write(tmp_path / "c" / "x.json", with_optin(h200_report, 101376))]
    code = main(["merge", *paths])
    out = capsys.readouterr().out
    assert code == 1
    blamed = {line.split(": measured.")[0] for line in out.splitlines() if ": measured." in line
              and line.startswith(str(tmp_path))}
    assert blamed == {f"{paths[2]}:0"}


def test_merge_refuses_the_same_file_twice(h200_report: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "x.json", h200_report)
    monkeypatch.chdir(tmp_path)
    code = main(["merge", path, "./x.json"])
    err = capsys.readouterr().err
    assert code == 2 and "./x.json is the same file as" in err


def test_merge_reports_a_one_to_one_tie_without_blame(h200_report: dict, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.json", h200_report)
    b = write(tmp_path / "b.json", with_optin(h200_report, 101376))
    for order in ([a, b], [b, a]):
        code = main(["merge", *order])
        out = capsys.readouterr().out
        assert code == 1
        assert "measured.optin_dynamic_ceiling_bytes: a tie between" in out and "nobody blamed" in out
        assert not [line for line in out.splitlines() if line.startswith(str(tmp_path)) and "majority:" in line]


def test_merge_names_the_planted_devices_of_a_large_fleet(h200_report: dict, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_merge import write_fleet

    planted = write_fleet(tmp_path, h200_report, reports=200, devices=8, deviating=4)
    code = main(["merge", *sorted(str(p) for p in tmp_path.glob("*.json"))])
    out = capsys.readouterr().out
    named = sorted({line.split(": measured.")[0] for line in out.splitlines()
                    if line.startswith(str(tmp_path)) and ": measured." in line})
    assert code == 1 and len(planted) == 4 and named == planted
    assert " 1600 " in out.splitlines()[2]


def no_gpu_report(h200_report: dict, result: str = "no_gpu", exit_code: int = 3) -> dict:
    """What a node that found no GPU writes: no device, and the run's result and error saying why."""
    error = "no usable GPU: no NVIDIA driver found" if exit_code == 3 else "interrupted before any device"
    return {**h200_report, "devices": [], "result": result, "exit_code": exit_code, "error": error}


def test_merge_of_a_node_that_saw_no_gpu_is_incomplete_and_names_it(h200_report: dict, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    good = [write(tmp_path / f"n{i}.json", h200_report) for i in range(2)]
    empty = write(tmp_path / "gpu-less.json", no_gpu_report(h200_report))
    code = main(["merge", *good, empty])
    out = capsys.readouterr().out
    named = [line for line in out.splitlines() if line.startswith(empty)]
    assert code == 4 and named == [f"{empty}: no device measured: no usable GPU: no NVIDIA driver found"]
    # A deviation still decides the exit, as a mismatch beside an incomplete measurement does.
    code = main(["merge", *good, write(tmp_path / "low.json", with_optin(h200_report, 101376)), empty])
    assert code == 1 and f"{empty}: no device measured" in capsys.readouterr().out


def test_merge_where_no_node_saw_a_gpu_is_no_gpu(h200_report: dict, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # As many as merge reads through its pool of processes, as a fleet is read.
    empty = [write(tmp_path / f"e{i}.json", no_gpu_report(h200_report)) for i in range(33)]
    assert main(["merge", *empty]) == 3
    assert len([line for line in capsys.readouterr().out.splitlines() if "no device measured" in line]) == 33
    stopped = write(tmp_path / "stopped.json", no_gpu_report(h200_report, "incomplete", 4))
    assert main(["merge", *empty, stopped]) == 4  # not every node says it has no GPU: the fleet is incomplete
    assert f"{stopped}: no device measured: interrupted before any device" in capsys.readouterr().out


def both_backends(h200_report: dict, numba_optin: int | None = None) -> dict:
    """A report as --backend all writes it: the GPU once per backend, under one index; numba measures no
    carveout and no clusters."""
    doc = copy.deepcopy(h200_report)
    doc["backend"] = "all"
    doc["devices"][0]["backend"] = "cupy"
    numba = copy.deepcopy(doc["devices"][0])
    numba["backend"] = "numba"
    numba["measured"].update(carveout=[], clusters=[])
    if numba_optin is not None:
        set_optin(numba["measured"], numba_optin)
    doc["devices"].append(numba)
    return doc


def test_merge_names_the_backend_of_a_gpu_measured_by_two(h200_report: dict, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / f"all{i}.json", both_backends(h200_report)) for i in range(2)]
    code = main(["merge", *paths])
    out = capsys.readouterr().out
    # Each backend is compared with the same backend elsewhere: numba's unmeasured carveout is no tie.
    assert code == 0 and "tie" not in out, out
    low = write(tmp_path / "low.json", both_backends(h200_report, numba_optin=101376))
    code = main(["merge", *paths, low])
    out = capsys.readouterr().out
    blamed = {line.split(": measured.")[0] for line in out.splitlines() if line.startswith(str(tmp_path))}
    assert code == 1 and blamed == {f"{low}:0 (numba)"}, out
    # One table row per backend, each counting the GPU once, and a single-backend report unlabelled.
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines()[2:] if line.startswith("Simulated")]
    assert [(row[2], row[3]) for row in rows] == [("cupy", "3"), ("numba", "3")], out
    single = [write(tmp_path / "one.json", h200_report), write(tmp_path / "low1.json", with_optin(h200_report, 101376)),
              write(tmp_path / "two.json", h200_report)]
    assert main(["merge", *single]) == 1
    assert f"{single[1]}:0: measured.optin_dynamic_ceiling_bytes: 101376" in capsys.readouterr().out
