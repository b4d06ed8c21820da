"""A device report as flat, named quantities: what baselines and fleet merges compare exactly.

Times, probe counts and other figures that vary from run to run are left out on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bisect_smem.core.integrity import validation_quantities
from bisect_smem.core.model import DeviceReport

CEILINGS = ("default_dynamic_ceiling_bytes", "optin_dynamic_ceiling_bytes", "attribute_accept_ceiling_bytes",
            "reserved_bytes", "allocation_granularity_bytes", "smem_per_sm_bytes")


def quantities(dev: DeviceReport) -> dict[str, Any]:
    """Every comparable quantity of one device, by a stable name."""
    q: dict[str, Any] = {}
    for source, view in sorted(dev.reported.items()):
        for key, value in sorted(view.items()):
            q[f"reported.{source}.{key}"] = value
    m = dev.measured
    if m is None:
        return q
    for name in CEILINGS:
        q[f"measured.{name}"] = getattr(m, name)
    for s in m.static_splits:
        prefix = f"measured.static_split.static={s.static_bytes}.threads={s.threads}"
        q[f"{prefix}.dynamic_ceiling_bytes"] = s.dynamic_ceiling_bytes
        q[f"{prefix}.static_footprint_bytes"] = s.static_footprint_bytes
    for r in m.residency:
        prefix = f"measured.residency.threads={r.threads}.blocks={r.blocks_per_sm_min}"
        q[f"{prefix}.from_dynamic_bytes"] = r.dynamic_bytes
        q[f"{prefix}.blocks_per_sm_max"] = r.blocks_per_sm_max
        q[f"{prefix}.api_blocks_per_sm"] = r.api_blocks_per_sm
    for c in m.carveout:
        prefix = f"measured.carveout.percent={c.percent}"
        q[f"{prefix}.blocks_per_sm"] = c.blocks_per_sm
        q[f"{prefix}.api_blocks_per_sm"] = c.api_blocks_per_sm
        q[f"{prefix}.carveout_range_bytes"] = list(c.carveout_range_bytes) if c.carveout_range_bytes else None
    for c in m.clusters:
        prefix = f"measured.cluster.dynamic={c.dynamic_bytes}"
        q[f"{prefix}.max_cluster_size_portable"] = c.max_cluster_size_portable
        q[f"{prefix}.max_cluster_size_nonportable"] = c.max_cluster_size_nonportable
        q[f"{prefix}.api_max_cluster_size"] = c.api_max_cluster_size
        q[f"{prefix}.dsm_verified"] = c.dsm_verified
        for size, counts in sorted(c.active_clusters.items(), key=lambda kv: int(kv[0])):
            q[f"{prefix}.active_clusters.size={size}"] = counts.get("measured")
            q[f"{prefix}.active_clusters.size={size}.api"] = counts.get("api")
    q.update(validation_quantities(m))
    return q


@dataclass(frozen=True)
class ExactCheck:
    """A regression check: the quantity must equal the baseline's, to the byte, and be present on both
    sides (a quantity the baseline lacks or this run lacks is a difference, never a silent pass)."""

    name: str

    def fails(self, current: dict[str, Any], baseline: dict[str, Any]) -> str | None:
        """The regression line, or None when the quantity is the same on both sides."""
        if self.name not in baseline:
            return f"{self.name}: not in the baseline, now {current.get(self.name)!r}"
        if self.name not in current:
            return f"{self.name}: baseline {baseline[self.name]!r}, not measured now"
        if current[self.name] != baseline[self.name]:
            return f"{self.name}: baseline {baseline[self.name]!r}, now {current[self.name]!r}"
        return None


def checks_for(current: dict[str, Any], baseline: dict[str, Any]) -> list[ExactCheck]:
    """One check per quantity named on either side: what only one side has is compared too."""
    return [ExactCheck(name) for name in sorted(set(current) | set(baseline))]
