"""`fit --target`: limits from a fleet (every device of a saved report, every baseline of a folder),
labelled with the device, its driver and the file; a device without a limit named; bad or impossible
target files refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.analysis.fit.cutlass.sm90 import build as sm90_build
from bisect_smem.analysis.fit.cutlass.sm120 import build as sm120_build
from bisect_smem.analysis.fit.triton.rule import TritonKernel, shared_of
from bisect_smem.app.cli import main as cli
from tests.conftest import set_optin

LOW_OPTIN = 180000


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["fit", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved report of two simulated H200s (one with a lower opt-in limit) and an RTX PRO's baseline."""
    folder = tmp_path_factory.mktemp("fleet")
    assert cli.main(["--simulate", "h200", "--simulate", f"h200,optin={LOW_OPTIN}", "--json", str(folder / "r.json"),
                     "--quiet"]) in (0, 1)
    cli.main(["--simulate", "rtx-pro-6000", "--save-baseline", str(folder / "baselines"), "--quiet", "--json", "-"])
    assert (folder / "r.json").is_file() and list((folder / "baselines").glob("*/*.json"))
    return folder


def test_target_report_labels_every_device_with_its_driver(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x64", "--dtype", "bf16", "--target", str(fleet / "r.json"), "--json", "-"],
                       capsys)
    results = json.loads(out)["results"]
    built = sm90_build(GemmKernel(128, 256, 64, "bf16", "bf16"))
    # CUTLASS builds one kernel for sm_90 whatever the device; the device with less opt-in cannot launch it.
    assert [(r["kind"], r["optin_limit_bytes"], r["stages"]) for r in results] == \
        [("measured", 232448, built.stages), ("measured", LOW_OPTIN, built.stages)]
    assert results[1]["verdict"] == "does not fit" and results[1]["over_bytes"] == built.shared_storage_bytes - LOW_OPTIN
    assert code == 1
    assert all(r["source"] == str(fleet / "r.json") and r["driver_version"] for r in results)
    assert "r.json device 1" in results[1]["target"] and "driver" in results[1]["target"]


def test_triton_on_a_fleet_picks_the_stages_per_device(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--rule", "triton", "--tile", "128x128x64", "--dtype", "fp16", "--target",
                        str(fleet / "r.json"), "--json", "-"], capsys)
    results = json.loads(out)["results"]
    kernel = TritonKernel(128, 128, 64, "fp16")
    want = [max(s for s in range(1, 17) if shared_of(kernel, s, (9, 0)).shared <= limit)
            for limit in (232448, LOW_OPTIN)]
    assert code == 0 and [r["stages"] for r in results] == want and want[1] < want[0]


def test_target_baseline_folder_is_labelled(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x128", "--dtype", "nvfp4", "--target", str(fleet / "baselines"),
                        "--arch", "9.0"], capsys)
    lines = out.splitlines()
    assert code == 1  # sm_90 has no block-scaled MMA
    assert lines[0].startswith("sm_90: no stage count")
    built = sm120_build(GemmKernel(128, 256, 128, "nvfp4", "nvfp4"))
    assert lines[1].startswith(f"{built.stages} stages fit on Simulated sm_120 (RTX PRO 6000")
    assert f": {built.shared_storage_bytes} of 101376 B" in lines[1]
    table = "\n".join(lines)
    assert "[baseline " in table and "driver" in table


def test_target_device_without_a_limit_is_named(fleet: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((fleet / "r.json").read_text())
    data["devices"][1].update(measured=None, error="gave up after 6 restarts")
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    code, out, _ = fit(["65536", "--target", str(path)], capsys)
    assert code == 4
    assert "limit unknown: gave up after 6 restarts" in out


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.json", "cannot read it"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "no baselines in it"),
    (lambda p: (p / "x.json").write_text("{\"schema\": \"other\"}") and p / "x.json", "not a bisect_smem/report/v1"),
    (lambda p: (p / "y.json").write_text("{\"devi") and p / "y.json", "not a readable report or baseline"),
])
def test_bad_targets_are_exit_2(make, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(["1000", "--target", str(make(tmp_path))], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("field, value", [
    ("optin_dynamic_ceiling_bytes", -5), ("optin_dynamic_ceiling_bytes", 0),
    ("optin_dynamic_ceiling_bytes", 2 ** 70), ("default_dynamic_ceiling_bytes", -1),
    ("default_dynamic_ceiling_bytes", 300000), ("reserved_bytes", -1024), ("smem_per_sm_bytes", 2 ** 40),
])
def test_impossible_limits_are_refused_naming_the_field(field: str, value: int, fleet: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((fleet / "r.json").read_text())
    data["devices"][0]["measured"][field] = value
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps(data))
    code, out, err = fit(["1000", "--target", str(path)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "device 0" in err and (field in err or "opt-in limit" in err) and str(value) in err, err


def both_backends(fleet: Path, tmp_path: Path, numba_optin: int | None = None) -> Path:
    """The first device of r.json as --backend all writes it: once per backend, under one index."""
    data = json.loads((fleet / "r.json").read_text())
    cupy = {**data["devices"][0], "backend": "cupy"}
    numba = json.loads(json.dumps({**cupy, "backend": "numba"}))
    if numba_optin is not None:
        set_optin(numba["measured"], numba_optin)
    data.update(backend="all", devices=[cupy, numba])
    path = tmp_path / "all.json"
    path.write_text(json.dumps(data))
    return path


def test_a_gpu_measured_by_two_backends_is_one_target(fleet: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["100K", "--target", str(both_backends(fleet, tmp_path)), "--json", "-"], capsys)
    results = json.loads(out)["results"]
    assert code == 0 and len(results) == 1 and results[0]["target"].endswith("[all.json device 0]")
    # Backends that measured the GPU's limits differently are each a row, labelled with the backend.
    code, out, _ = fit(["100K", "--target", str(both_backends(fleet, tmp_path, numba_optin=LOW_OPTIN)),
                        "--json", "-"], capsys)
    results = json.loads(out)["results"]
    assert [(r["target"].rsplit("[", 1)[1], r["optin_limit_bytes"]) for r in results] == \
        [("all.json device 0, cupy; the backends measured different limits]", 232448),
         ("all.json device 0, numba; the backends measured different limits]", LOW_OPTIN)]
    code, out, _ = fit(["100K", "--target", str(both_backends(fleet, tmp_path, numba_optin=LOW_OPTIN))], capsys)
    assert len({line.split(": ")[0] for line in out.splitlines()[0].split("; ")}) == 2, out
