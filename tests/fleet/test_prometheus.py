"""--prom and `export prom`, read by the consumers: prometheus_client's text parser, a HELP/TYPE check
the parser does not make, and promtool (Debian's prometheus package; `make test` installs it as root)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bisect_smem.app.cli import main as cli
from bisect_smem.app.render.prom import render
from bisect_smem.core.saved import load_report
from tests.conftest import consumer_tool
from tests.paths import H200_REPORT

DEVICE_LABELS = {"gpu", "UUID", "pci_bus_id", "driver_version"}


def families(text: str) -> dict[str, object]:
    """The families prometheus_client reads, by name, after the checks it does not make: one HELP and one
    TYPE line per family, before its samples, all of which are together; a final newline; no timestamp."""
    assert text.endswith("\n") and not text.endswith("\n\n")
    helps, types, order = Counter(), Counter(), []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps[line.split()[2]] += 1
        elif line.startswith("# TYPE "):
            types[line.split()[2]] += 1
            order.append(line.split()[2])
        else:
            name = line.split("{")[0].split(" ")[0]
            assert name == order[-1], f"sample {name} outside its family {order[-1]}"
    assert set(helps.values()) == {1} and set(types.values()) == {1} and helps.keys() == types.keys()
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(parsed) == set(helps)
    assert all(s.timestamp is None for f in parsed.values() for s in f.samples)
    assert all(f.type == "gauge" and f.name.startswith("bisect_smem_") for f in parsed.values())
    return parsed


def promtool(text: str) -> None:
    """promtool check metrics on the text, where promtool is installed."""
    tool = consumer_tool("promtool", "`make test` installs Debian's prometheus package as root")
    checked = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _measure(tmp_path: Path, spec: str) -> tuple[int, str, dict]:
    prom, report = tmp_path / "smem.prom", tmp_path / "r.json"
    code = cli.main(["--simulate", spec, "--prom", str(prom), "--json", str(report), "--quiet"])
    return code, prom.read_text(), json.loads(report.read_text())


def test_a_mismatching_device_is_device_ok_0(tmp_path: Path) -> None:
    code, text, report = _measure(tmp_path, "h200,optin=204800")
    assert code == 1
    parsed = families(text)
    (ok,) = parsed["bisect_smem_device_ok"].samples
    assert ok.value == 0 and set(ok.labels) == DEVICE_LABELS and ok.labels["gpu"] == "0"
    assert ok.labels["UUID"] == report["devices"][0]["context"]["nvml_uuid"]
    (optin,) = parsed["bisect_smem_optin_dynamic_ceiling_bytes"].samples
    assert optin.value == 204800
    rows = {s.labels["verdict"]: s.value for s in parsed["bisect_smem_verdict_rows"].samples}
    assert rows == {k: float(v) for k, v in report["devices"][0]["summary"]["counts"].items()}
    assert parsed["bisect_smem_last_run_exit_code"].samples[0].value == 1
    promtool(text)


def test_a_healthy_device_is_device_ok_1_with_the_measured_bytes(tmp_path: Path) -> None:
    code, text, _ = _measure(tmp_path, "h200")
    parsed = families(text)
    assert code == 0 and parsed["bisect_smem_device_ok"].samples[0].value == 1
    for name, value in (("optin_dynamic_ceiling", 232448), ("default_dynamic_ceiling", 49152),
                        ("smem_per_sm", 233472), ("reserved", 1024), ("allocation_granularity", 128)):
        assert parsed[f"bisect_smem_{name}_bytes"].samples[0].value == value, name
    (info,) = parsed["bisect_smem_build_info"].samples
    assert info.value == 1 and info.labels["schema"] == "bisect_smem/report/v1"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # the temporary file was renamed
    promtool(text)


def test_export_prom_from_the_saved_report_is_the_same_text(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _, text, _ = _measure(tmp_path, "h200,optin=204800")
    capsys.readouterr()
    assert cli.main(["export", "prom", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out == text
    out = tmp_path / "export.prom"
    assert cli.main(["export", "prom", str(tmp_path / "r.json"), "--output", str(out)]) == 0
    assert out.read_text() == text


def test_export_prom_of_the_real_h200_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", "prom", str(H200_REPORT)]) == 0
    text = capsys.readouterr().out
    parsed = families(text)
    (ok,) = parsed["bisect_smem_device_ok"].samples
    assert ok.value == 1 and ok.labels["UUID"] == json.loads(H200_REPORT.read_text())["devices"][0]["context"]["nvml_uuid"]
    assert ok.labels["driver_version"] == "580.159.04" and ok.labels["pci_bus_id"] == "00000000:00:06.0"
    assert parsed["bisect_smem_optin_dynamic_ceiling_bytes"].samples[0].value == 232448
    promtool(text)


def test_label_values_are_escaped() -> None:
    report = load_report(H200_REPORT)
    odd = 'driver "580"\\ with\na newline'
    dev = report.devices[0]
    report = replace(report, devices=(replace(dev, context=replace(dev.context, nvml_driver_version=odd)),))
    parsed = families(render(report))
    assert parsed["bisect_smem_device_ok"].samples[0].labels["driver_version"] == odd


@pytest.mark.parametrize("value, message", [("-", "give a path, not '-'"), ("", "empty path")])
def test_a_prom_path_that_cannot_be_a_file_is_refused_before_measuring(
        value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    assert cli.main(["--simulate", "h200", "--prom", value, "--json", str(report), "--quiet"]) == 2
    assert message in capsys.readouterr().err and not report.exists()


def test_export_of_a_file_that_is_not_a_report_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\"schema\": \"something/else\"}")
    assert cli.main(["export", "prom", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {bad}: not a bisect_smem/report/v1 file")


def both_backends_report(tmp_path: Path) -> Path:
    """The real H200 report as --backend all writes it: the device once per backend, under one index."""
    data = json.loads(H200_REPORT.read_text())
    data["backend"] = "all"
    data["devices"].append({**data["devices"][0], "backend": "numba"})
    path = tmp_path / "all.json"
    path.write_text(json.dumps(data))
    return path


def test_a_device_measured_by_two_backends_is_one_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", "prom", str(both_backends_report(tmp_path))]) == 0
    text = capsys.readouterr().out
    samples = [line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert [s for s, n in Counter(samples).items() if n > 1] == []  # node_exporter refuses a repeated series
    parsed = families(text)
    assert [s.value for s in parsed["bisect_smem_devices"].samples] == [1]
    assert [s.value for s in parsed["bisect_smem_device_ok"].samples] == [1]
    promtool(text)


def test_a_failing_backend_fails_the_device_it_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = both_backends_report(tmp_path)
    data = json.loads(path.read_text())
    data["devices"][1]["verdicts"] = [{**data["devices"][1]["verdicts"][0], "verdict": "MISMATCH"}]
    path.write_text(json.dumps(data))
    assert cli.main(["export", "prom", str(path)]) == 0
    parsed = families(capsys.readouterr().out)
    assert [s.value for s in parsed["bisect_smem_device_ok"].samples] == [0]
