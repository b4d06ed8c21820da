"""A device report as flat, named quantities: what baselines and fleet merges compare exactly.

Times, probe counts and other figures that vary from run to run are left out on purpose. The quantities
are read from the device's JSON form, so a DeviceReport (through ``to_jsonable``) and a report file
parsed by ``merge`` go through the same lines and cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bisect_smem.core.attributes import SOURCE_KEYS
from bisect_smem.core.levels import split_quantity_prefix
from bisect_smem.core.model import DeviceReport, to_jsonable

CEILINGS = ("default_dynamic_ceiling_bytes", "optin_dynamic_ceiling_bytes", "attribute_accept_ceiling_bytes",
            "reserved_bytes", "allocation_granularity_bytes", "smem_per_sm_bytes")


def quantities(dev: DeviceReport) -> dict[str, Any]:
    """Every comparable quantity of one device, by a stable name."""
    return json_quantities(to_jsonable(dev))


def json_quantities(dev: dict[str, Any]) -> dict[str, Any]:
    """``quantities`` of a device in its report's JSON form (schema-checked), keyed as in the JSON: a key
    the dataclass requires (core/schema.py's ``construct``) is indexed, one it defaults is read with ``get``."""
    q: dict[str, Any] = {}
    for source, view in sorted(dev.get("reported", {}).items()):
        if view is None:
            continue  # a source that was never read
        # A source's known attributes are its fields, null or not; what else a file holds is read too.
        for key in sorted({*SOURCE_KEYS.get(source, ()), *view}):
            q[f"reported.{source}.{key}"] = view.get(key)
    m = dev.get("measured")
    if m is None:
        return q
    for name in CEILINGS:
        q[f"measured.{name}"] = m.get(name)
    for s in m.get("static_splits", ()):
        prefix = split_quantity_prefix(s["static_bytes"], s["threads"])
        q[f"{prefix}.dynamic_ceiling_bytes"] = s["dynamic_ceiling_bytes"]
        q[f"{prefix}.static_footprint_bytes"] = s.get("static_footprint_bytes")
    for r in m.get("residency", ()):
        prefix = f"measured.residency.threads={r['threads']}.blocks={r['blocks_per_sm_min']}"
        q[f"{prefix}.from_dynamic_bytes"] = r["dynamic_bytes"]
        q[f"{prefix}.blocks_per_sm_max"] = r["blocks_per_sm_max"]
        q[f"{prefix}.api_blocks_per_sm"] = r.get("api_blocks_per_sm")
    for c in m.get("carveout", ()):
        prefix = f"measured.carveout.percent={c['percent']}"
        q[f"{prefix}.blocks_per_sm"] = c["blocks_per_sm"]
        q[f"{prefix}.api_blocks_per_sm"] = c.get("api_blocks_per_sm")
        q[f"{prefix}.carveout_range_bytes"] = list(c["carveout_range_bytes"]) if c.get("carveout_range_bytes") else None
    for c in m.get("clusters", ()):
        _cluster_quantities(q, c)
    q.update(_validation_quantities(m))
    return q


def _cluster_quantities(q: dict[str, Any], c: dict[str, Any]) -> None:
    prefix = f"measured.cluster.dynamic={c['dynamic_bytes']}"
    q[f"{prefix}.max_cluster_size_portable"] = c.get("max_cluster_size_portable")
    q[f"{prefix}.max_cluster_size_nonportable"] = c.get("max_cluster_size_nonportable")
    q[f"{prefix}.api_max_cluster_size"] = c.get("api_max_cluster_size")
    q[f"{prefix}.dsm_verified"] = c.get("dsm_verified")
    for size, counts in sorted(c.get("active_clusters", {}).items(), key=lambda kv: int(kv[0])):
        q[f"{prefix}.active_clusters.size={size}"] = counts.get("measured")
        q[f"{prefix}.active_clusters.size={size}.api"] = counts.get("api")


def _validation_quantities(m: dict[str, Any]) -> dict[str, Any]:
    """The validation's comparable quantities (None where not validated): which SMs ran and failed, which
    sizes failed, and what was visible. Counts of words and launches vary from run to run and are left out."""
    march, sweep, left = m.get("march") or None, m.get("granule_sweep") or None, m.get("leftovers") or None
    prefix = "measured.validation."
    return {
        f"{prefix}march.sms_covered": len(march.get("sms_seen", ())) if march else None,
        f"{prefix}march.failed_sms": [f["sm_id"] for f in march.get("failures", ())] if march else None,
        f"{prefix}granule_sweep.failing_bytes": list(sweep.get("failing_bytes", ())) if sweep else None,
        f"{prefix}granule_sweep.over_ceiling_failed": sweep.get("over_ceiling_failed") if sweep else None,
        f"{prefix}leftovers.across_processes_visible":
            left["across_processes_words_matching"] > 0 if left else None,
        f"{prefix}leftovers.within_process_visible": left["within_process_words_matching"] > 0 if left else None,
    }


@dataclass(frozen=True)
class Regression:
    """One quantity against its baseline: the same on both sides, to the byte, or a regression. A
    quantity only one side has is a difference too, never a silent pass (``in_baseline``, ``measured_now``
    say which side has it)."""

    name: str
    baseline: Any = None
    now: Any = None
    in_baseline: bool = True
    measured_now: bool = True

    @property
    def fails(self) -> bool:
        """The quantity is missing on a side or differs."""
        return not (self.in_baseline and self.measured_now) or self.baseline != self.now

    @classmethod
    def between(cls, name: str, current: dict[str, Any], baseline: dict[str, Any]) -> Regression:
        """Quantity ``name`` of this run against the baseline's."""
        return cls(name, baseline.get(name), current.get(name), name in baseline, name in current)


def compare_quantities(current: dict[str, Any], baseline: dict[str, Any]) -> list[Regression]:
    """Every quantity named on either side against the other side: what only one side has is compared too."""
    return [Regression.between(name, current, baseline) for name in sorted(set(current) | set(baseline))]
