"""A device's measured limits as a fit Target: what it measured now, or what a saved report or baseline
recorded, checked by the one plausibility rule every reader of a report applies. Apart from targets.py, so
that fit against published architectures loads no report model."""

from __future__ import annotations

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import DEFAULT_GRANULE_BYTES
from bisect_smem.core.jsonable import to_jsonable
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.plausible import check_quantities
from bisect_smem.core.profiles import parse_cc
from bisect_smem.core.schema import SchemaError


def measured_target(dev: DeviceReport, name: str | None = None, source: str | None = None,
                    driver_version: str | None = None) -> Target:
    """What a device measured (now, or in a saved report or baseline), labelled ``name``; ``driver_version``
    overrides the report's own (a baseline's provenance)."""
    m = dev.measured
    driver = dev.reported.get("driver", {})
    optin = m.optin_dynamic_ceiling_bytes if m else None
    error = dev.error
    if optin is None and error is None:
        error = "the opt-in ceiling was not measured"
    where = f"{source}: device {dev.index}" if source else f"device {dev.index}"
    driver_version = driver_version or dev.context.get("nvml_driver_version")
    cc = None if dev.compute_capability is None else parse_cc(dev.compute_capability, f"{where} compute capability")
    if m is not None:
        # The one rule per quantity that every reader of a report applies, for a device measured now too.
        try:
            check_quantities(to_jsonable(m), f"{where} measured")
        except SchemaError as exc:
            raise UsageError(str(exc)) from None
    return Target(
        name or f"device {dev.index}: {dev.name} (cc {dev.compute_capability})", "measured",
        m.default_dynamic_ceiling_bytes if m else None, optin,
        (m.smem_per_sm_bytes if m and m.smem_per_sm_bytes else driver.get("max_shared_memory_per_multiprocessor_bytes")),
        (m.reserved_bytes if m and m.reserved_bytes is not None else 0),
        (m.allocation_granularity_bytes if m and m.allocation_granularity_bytes else DEFAULT_GRANULE_BYTES),
        driver.get("max_blocks_per_multiprocessor"), driver.get("max_threads_per_multiprocessor"),
        cc, driver_version, error, source,
        f"device {dev.index}" if source is None else f"{dev.name} {driver_version or ''}".strip())
