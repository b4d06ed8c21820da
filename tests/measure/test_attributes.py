"""What a device reports is typed: each source's view names its fields after the attribute (with the unit),
two sources that disagree make one MISMATCH row, and the JSON keeps the names as its keys."""

from __future__ import annotations

from bisect_smem.analysis.verdicts import build_verdicts, published_verdicts
from bisect_smem.core.attributes import (
    DeviceAttributes,
    DeviceContext,
    DriverAttributes,
    NvmlInfo,
    ReportedAttributes,
)
from bisect_smem.core.jsonable import to_jsonable
from bisect_smem.core.model import DeviceReport, Measured
from bisect_smem.core.quantities import json_quantities, quantities
from bisect_smem.core.rows import Family
from bisect_smem.devices.attributes import driver_view, runtime_view
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.spec import SimSpec

REPORTED = ReportedAttributes(DriverAttributes(max_shared_memory_per_block_optin_bytes=232448, multiprocessor_count=132),
                              DeviceAttributes(max_shared_memory_per_block_optin_bytes=101376,
                                               multiprocessor_count=132))


def test_the_driver_comes_first_and_disagreements_name_both_values() -> None:
    assert REPORTED.best("max_shared_memory_per_block_optin_bytes") == (232448, "driver")
    only_runtime = ReportedAttributes(runtime=DeviceAttributes(multiprocessor_count=8))
    assert only_runtime.best("multiprocessor_count") == (8, "runtime") and only_runtime.best("cluster_launch") == (
        None, None)
    assert REPORTED.disagreements() == [("max_shared_memory_per_block_optin_bytes",
                                         {"driver": 232448, "runtime": 101376})]
    (row,) = [v for v in build_verdicts(REPORTED, Measured(), None) if v.family is Family.SOURCES]
    assert row.quantity == "max_shared_memory_per_block_optin_bytes agrees across sources"
    assert row.verdict == "MISMATCH" and row.source == "driver/runtime"
    assert row.note == "max_shared_memory_per_block_optin_bytes: driver 232448, runtime 101376"


def test_a_cc_the_table_lacks_is_information() -> None:
    (row,) = published_verdicts(Measured(), None, "13.0")
    assert row.family is Family.NOT_PUBLISHED and row.verdict == "info" and row.kind == "reference"


def test_views_are_read_by_id_and_by_runtime_name() -> None:
    session = SimBackend((SimSpec.parse("h200"),)).open(0, (0,))
    driver, runtime = driver_view(session.driver_attributes()), runtime_view(session.runtime_attributes())
    assert driver.max_shared_memory_per_block_optin_bytes == runtime.max_shared_memory_per_block_optin_bytes == 232448
    assert driver.max_oversized_shared_memory_per_block_bytes is None and driver.cluster_launch == 1
    assert driver.get("multiprocessor_count") == 132 and driver.get("no_such_attribute") is None


def test_the_json_keeps_the_attribute_names_and_reads_absent_ones_as_unknown() -> None:
    dev = DeviceReport(0, reported=REPORTED)
    data = to_jsonable(dev)
    assert data["reported"]["driver"]["max_shared_memory_per_block_optin_bytes"] == 232448
    assert "max_oversized_shared_memory_per_block_bytes" not in data["reported"]["runtime"]
    sparse = {**data, "reported": {"driver": {"multiprocessor_count": 132}, "runtime": None}}
    q = json_quantities(sparse)
    assert q["reported.driver.multiprocessor_count"] == 132 and q["reported.driver.cluster_launch"] is None
    assert not any(k.startswith("reported.runtime.") for k in q)
    assert quantities(dev) == json_quantities(data)


def test_the_context_holds_nvml_under_its_report_names() -> None:
    nvml = NvmlInfo(driver_version="580.159.04", uuid="GPU-1", virtualization_mode="passthrough")
    ctx = DeviceContext(pci_bus_id="0000:00:06.0", cupy_version="14.2.0").with_nvml(nvml)
    assert ctx.nvml_driver_version == "580.159.04" and ctx.nvml_uuid == "GPU-1" and ctx.nvml == nvml
    assert ctx.get("nvml_virtualization_mode") == "passthrough" and ctx.get("no_such_key", "x") == "x"
    assert to_jsonable(ctx)["cupy_version"] == "14.2.0"
