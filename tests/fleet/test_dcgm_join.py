"""The Prometheus series join with dcgm-exporter's as the docs say: ``on(UUID)``, and ``on(pci_bus_id)``
also where NVML could not be read (the CUDA bus id is written in NVML's format). ``gpu`` is the CUDA ordinal,
which differs from DCGM's NVML index in a pod or a job that sees some of the GPUs: the DCGM page here is
an 8-GPU node's, where the H200 the tool measured as device 0 is DCGM's gpu 3.

tests/data/dcgm_exporter_h200.prom is a dcgm-exporter page in its own label format (``gpu``, ``UUID``,
``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION``) for the H200 of
tests/data/h200_report.json and a second GPU."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bisect_smem.app.render.prom import render
from bisect_smem.core.attributes import nvml_bus_id
from bisect_smem.core.saved import load_report
from tests.conftest import consumer_tool
from tests.paths import DATA

DCGM_PAGE = DATA / "dcgm_exporter_h200.prom"
OURS = "bisect_smem_optin_dynamic_ceiling_bytes"
JOIN = f"{OURS} * on(UUID) group_left(modelName, Hostname) (DCGM_FI_DEV_FB_USED * 0 + 1)"


def _series(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def _join(ours: str, key: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Each of our device series with the DCGM series that have the same value of ``key``."""
    dcgm = [labels for name, labels, _ in _series(DCGM_PAGE.read_text()) if name == "DCGM_FI_DEV_SM_CLOCK"]
    return [(labels, other) for name, labels, _ in _series(ours) if name == OURS
            for other in dcgm if labels.get(key) and other[key] == labels[key]]


def _without_nvml() -> str:
    report = load_report(DATA / "h200_report.json")
    dev = report.devices[0]
    context = replace(dev.context, nvml_uuid=None, nvml_pci_bus_id=None, nvml_driver_version=None)
    return render(replace(report, devices=(replace(dev, context=context),)))


def test_the_h200_joins_dcgm_on_uuid_and_on_pci_bus_id_but_not_on_gpu() -> None:
    ours = render(load_report(DATA / "h200_report.json"))
    for key in ("UUID", "pci_bus_id"):
        joined = _join(ours, key)
        assert len(joined) == 1 and joined[0][1]["modelName"] == "NVIDIA H200", key
        assert joined[0][1]["DCGM_FI_DRIVER_VERSION"] == joined[0][0]["driver_version"]
    assert [other["UUID"] for _, other in _join(ours, "gpu")] == ["GPU-00000000-0000-0000-0000-000000000001"]


def test_without_nvml_the_cuda_bus_id_still_joins_in_dcgm_format() -> None:
    joined = _join(_without_nvml(), "pci_bus_id")
    assert len(joined) == 1 and joined[0][0]["pci_bus_id"] == "00000000:00:06.0"


@pytest.mark.parametrize(("cuda", "nvml"), [("0000:3b:00.0", "00000000:3B:00.0"), ("0000:00:06.0", "00000000:00:06.0"),
                                            ("00000000:3B:00.0", "00000000:3B:00.0"), ("odd", "odd"), ("", "")])
def test_a_cuda_bus_id_in_nvml_format(cuda: str, nvml: str) -> None:
    assert nvml_bus_id(cuda) == nvml


def _promtool_series(text: str) -> list[str]:
    out = []
    for name, labels, value in _series(text):
        quoted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        out.append(f"      - series: '{name}{{{quoted}}}'\n        values: '{value:g}x2'")
    return out


def test_promql_joins_the_two_pages_on_uuid(tmp_path: Path) -> None:
    # Prometheus' own PromQL engine (promtool test rules) evaluates the join the docs give.
    consumer_tool("promtool", "`make test` installs Debian's prometheus package as root")
    ours = render(load_report(DATA / "h200_report.json"))
    tests = tmp_path / "join_test.yml"
    tests.write_text("\n".join([
        "rule_files: []", "evaluation_interval: 1m", "tests:", "  - interval: 1m", "    input_series:",
        *_promtool_series(ours), *_promtool_series(DCGM_PAGE.read_text()), "    promql_expr_test:",
        f"      - expr: '{JOIN}'", "        eval_time: 1m", "        exp_samples:",
        # The product drops the metric's name, as PromQL's arithmetic does.
        "          - labels: '" + '{Hostname="vm",UUID="GPU-7d135d97-dc13-07cb-cb99-a0da6e460904",'
        'driver_version="580.159.04",gpu="0",modelName="NVIDIA H200",pci_bus_id="00000000:00:06.0"}\'',
        "            value: 232448", ""]))
    done = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
