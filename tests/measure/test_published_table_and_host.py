"""Validation against the published table, and the host context that explains differences."""

from __future__ import annotations

from pathlib import Path

from bisect_smem.analysis.verdicts import published_verdicts
from bisect_smem.app.render.host import describe
from bisect_smem.core.model import Measured
from bisect_smem.core.profiles import find_profile
from bisect_smem.devices.host import container_kind, cpu_hypervisor_flag

H200_MEASURED = Measured(optin_dynamic_ceiling_bytes=232448, reserved_bytes=1024, smem_per_sm_bytes=233472)


def test_published_rows_match_a_device_that_agrees() -> None:
    rows = published_verdicts(H200_MEASURED, find_profile("h200"), "9.0")
    assert [(r.quantity, r.verdict) for r in rows] == [
        ("published: shared memory per SM", "match"), ("published: opt-in per block", "match"),
        ("published: reserved per block", "match")]


def test_a_device_that_differs_from_a_confirmed_row_is_a_mismatch() -> None:
    # An RTX PRO 6000 measured as if it were a Hopper part: the table disagrees.
    rows = published_verdicts(H200_MEASURED, find_profile("rtx-pro-6000"), "12.0")
    assert [r.verdict for r in rows] == ["MISMATCH", "MISMATCH", "match"]
    assert rows[1].note == "measured +131072 B against reported"


def test_an_unconfirmed_row_only_informs() -> None:
    rows = published_verdicts(Measured(optin_dynamic_ceiling_bytes=101376), find_profile("b300"), "10.3")
    assert rows[1].verdict == "info" and "(unconfirmed)" in rows[1].source


def test_a_cc_newer_than_the_table_is_not_a_mismatch() -> None:
    (row,) = published_verdicts(H200_MEASURED, None, "13.0")
    assert row.verdict == "info" and row.note == "cc 13.0 is not in the published table"


def test_cpu_hypervisor_flag() -> None:
    assert cpu_hypervisor_flag("processor: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n") is True
    assert cpu_hypervisor_flag("flags\t\t: fpu vme\n") is False
    assert cpu_hypervisor_flag(None) is None


def test_container_kind(tmp_path: Path) -> None:
    assert container_kind(str(tmp_path), {}) is None
    assert container_kind(str(tmp_path), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/system.slice/containerd.service\n")
    assert container_kind(str(tmp_path), {}) == "containerd"
    (tmp_path / ".dockerenv").write_text("")
    assert container_kind(str(tmp_path), {}) == "docker"


def test_host_line() -> None:
    line = describe({"cpu_hypervisor_flag": True, "dmi_sys_vendor": "Amazon EC2", "dmi_product_name": "p5.48xlarge",
                     "container": None})
    assert line == "hypervisor yes | DMI Amazon EC2 p5.48xlarge | container none"
