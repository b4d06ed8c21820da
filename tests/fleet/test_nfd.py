"""--nfd and `export nfd`: a Node Feature Discovery feature file whose every line NFD and the API server
accept (the apimachinery label regexes, NFD's namespace rule), under 65536 B, with an expiry line."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.render.nfd import render, slug
from bisect_smem.core.saved import load_report
from tests.paths import H200_REPORT

# k8s.io/apimachinery/pkg/util/validation: qualified name part and label value, 63 characters at most;
# the prefix is a DNS-1123 subdomain of at most 253.
NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
EXPIRY = re.compile(r"^# \+expiry-time=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")


def parse(text: str) -> tuple[dt.datetime, dict[str, str]]:
    """The expiry and the labels, each line checked as NFD and the API server check it."""
    assert len(text.encode()) <= 65536 and text.endswith("\n")
    first, *lines = text.splitlines()
    expiry = dt.datetime.strptime(EXPIRY.match(first).group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    labels = {}
    for line in lines:
        key, value = line.split("=", 1)
        prefix, name = key.split("/")
        assert len(prefix) <= 253 and SUBDOMAIN.match(prefix), prefix
        # NFD allows feature.node.kubernetes.io and its subdomains without -extra-label-ns.
        assert prefix == "feature.node.kubernetes.io" or prefix.endswith(".feature.node.kubernetes.io"), prefix
        assert len(name) <= 63 and NAME.match(name), name
        assert len(value) <= 63 and VALUE.match(value), value
        labels[name] = value
    return expiry, labels


def _measure(tmp_path: Path, *specs: str, expiry: str | None = None) -> tuple[int, Path, dict]:
    features, report = tmp_path / "bisect-smem", tmp_path / "r.json"
    args = [a for spec in specs for a in ("--simulate", spec)]
    code = cli.main([*args, "--nfd", str(features), "--json", str(report), "--quiet",
                     *(["--nfd-expiry", expiry] if expiry else [])])
    return code, features, json.loads(report.read_text())


def test_a_mismatch_is_verdict_fail_and_the_minimum_over_the_gpus(tmp_path: Path) -> None:
    code, features, report = _measure(tmp_path, "h200", "h200,optin=204800")
    expiry, labels = parse(features.read_text())
    assert code == 1 and labels["verdict"] == "fail" and labels["gpu.count"] == "2"
    assert labels["smem.optin-bytes"] == "204800" and labels["smem.default-bytes"] == "49152"
    assert labels["smem.per-sm-bytes"] == "233472"
    created = dt.datetime.fromisoformat(report["created_utc"])
    assert int(labels["timestamp"]) == int(created.timestamp())
    assert expiry - created == dt.timedelta(days=1)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # written as a dot file, then renamed


def test_a_healthy_node_is_verdict_pass_with_its_expiry(tmp_path: Path) -> None:
    code, features, report = _measure(tmp_path, "h200", expiry="3600")
    expiry, labels = parse(features.read_text())
    assert code == 0 and labels["verdict"] == "pass"
    assert expiry - dt.datetime.fromisoformat(report["created_utc"]) == dt.timedelta(hours=1)


def test_an_incomplete_run_is_verdict_incomplete(tmp_path: Path) -> None:
    code, features, _ = _measure(tmp_path, "h200,sticky=200000", "h200")
    assert parse(features.read_text())[1]["verdict"] == "incomplete"


def test_a_node_without_a_gpu_is_verdict_no_gpu_as_its_json_says(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(H200_REPORT.read_text())
    report.update(devices=[], result="no_gpu", exit_code=3, error="no usable GPU: no NVIDIA driver found")
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert cli.main(["export", "nfd", str(tmp_path / "r.json")]) == 0
    labels = parse(capsys.readouterr().out)[1]
    assert labels["verdict"] == "no_gpu" and labels["gpu.count"] == "0" and "smem.optin-bytes" not in labels


def test_every_label_and_verdict_is_documented(tmp_path: Path) -> None:
    from bisect_smem.app.render.nfd import labels
    from bisect_smem.core.status import RESULTS

    docs = (Path(__file__).resolve().parents[2] / "docs" / "outputs.md").read_text()
    table = docs[docs.index("| label | value |"):]
    table = table[:table.index("\n\n")]
    documented = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", table, re.MULTILINE))
    assert set(labels(load_report(H200_REPORT))) <= set(documented)
    for result in RESULTS.values():
        assert f"`{result}`" in documented["verdict"], result


def test_the_real_h200_values_are_slugged(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", "nfd", str(H200_REPORT)]) == 0
    _, labels = parse(capsys.readouterr().out)
    assert labels["gpu.product"] == "NVIDIA-H200" and labels["driver"] == "580.159.04"
    assert labels["smem.optin-bytes"] == "232448" and labels["verdict"] == "pass"


def test_export_nfd_is_what_the_measurement_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, features, _ = _measure(tmp_path, "h200,optin=204800")
    capsys.readouterr()
    assert cli.main(["export", "nfd", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out == features.read_text()


@pytest.mark.parametrize("text, want", [("NVIDIA H200", "NVIDIA-H200"), ("  (x) ", "x"), ("-a-", "a"),
                                        ("NVIDIA RTX PRO 6000 Blackwell Server Edition" * 2, None), ("é", "")])
def test_slug_makes_valid_values(text: str, want: str | None) -> None:
    got = slug(text)
    assert len(got) <= 63 and VALUE.match(got)
    if want is not None:
        assert got == want


def test_an_odd_device_name_still_gives_valid_lines() -> None:
    report = load_report(H200_REPORT)
    report = replace(report, devices=(replace(report.devices[0], name="GPU/\"odd\"=name\nx" * 9),))
    _, labels = parse(render(report))
    assert labels["gpu.product"].startswith("GPU-odd-name-x")


def test_a_gpu_measured_by_two_backends_counts_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(H200_REPORT.read_text())  # as --backend all writes it: the device once per backend
    data["backend"] = "all"
    data["devices"].append({**data["devices"][0], "backend": "numba"})
    path = tmp_path / "all.json"
    path.write_text(json.dumps(data))
    assert cli.main(["export", "nfd", str(path)]) == 0
    _, labels = parse(capsys.readouterr().out)
    assert labels["gpu.count"] == "1" and labels["smem.optin-bytes"] == "232448"


@pytest.mark.parametrize(("args", "message"), [
    (["--simulate", "h200", "--nfd-expiry", "60"], "error: --nfd-expiry only applies to --nfd"),
    (["export", "prom", str(H200_REPORT), "--nfd-expiry", "60"], "error: --nfd-expiry only applies to export nfd"),
], ids=["measure", "export-prom"])
def test_an_expiry_without_a_feature_file_is_refused(args: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(args)
    out = capsys.readouterr()
    assert (code, out.out, out.err) == (2, "", message + "\n")


@pytest.mark.parametrize(("given", "whole_seconds"), [("0.5", 1), ("0.001", 1), ("1.2", 2), ("2", 2)])
def test_an_expiry_of_a_fraction_of_a_second_is_rounded_up(given: str, whole_seconds: int, tmp_path: Path) -> None:
    # NFD reads whole seconds: 0.5 s rounded down would expire the labels the second they were measured.
    code, features, report = _measure(tmp_path, "h200", expiry=given)
    expiry, _ = parse(features.read_text())
    assert code == 0 and expiry - dt.datetime.fromisoformat(report["created_utc"]) == dt.timedelta(seconds=whole_seconds)



def test_export_nfd_of_an_old_report_warns_that_its_labels_expired(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", "nfd", str(H200_REPORT), "--nfd-expiry", "60"]) == 0  # measured 2026-11-30T14:18:14
    out, err = capsys.readouterr()
    assert out.startswith("# +expiry-time=2026-11-30T14:19:14Z\n")  # still written: the labels are the report's
    assert err.startswith("warning: these labels expired at 2026-11-30T14:19:14Z (") and "NFD ignores them" in err
    assert len(err.splitlines()) == 1
    _measure(tmp_path, "h200")
    capsys.readouterr()
    assert cli.main(["export", "nfd", str(tmp_path / "r.json")]) == 0  # measured now: a day to go
    assert capsys.readouterr().err == ""
