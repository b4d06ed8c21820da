"""Compare what was measured with what the device reports and with the published table.

A row is ``match`` only when the measured number is exact and its search was trustworthy (boundary
confirmed, monotone, within its probe bound). An untrustworthy search is an ERROR row, never a match.
"""

from __future__ import annotations

from typing import Any

from bisect_smem.analysis.integrity_verdicts import validation_verdicts
from bisect_smem.core.hardware import PORTABLE_CLUSTER_SIZE, portable_cluster_limit, static_footprint
from bisect_smem.core.model import CarveoutPoint, Ceiling, Measured, ResidencyStep, Verdict
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.devices.attributes import best_value, disagreements


def _compare(quantity: str, reported: Any, source: str | None, measured: Any, search: Ceiling | None = None,
             note: str = "") -> Verdict:
    notes = [note] if note else []
    if search is not None:
        if search.error:
            return Verdict(quantity, reported, source, measured, "ERROR", search.error)
        if search.unstable_range_bytes:
            lo, hi = search.unstable_range_bytes
            where = f"{lo} B both launched and failed" if lo == hi else \
                f"failures from {lo} B, successes up to {hi} B"
            return Verdict(quantity, reported, source, measured, "ERROR", f"unstable: {where}")
        if search.non_monotone_at_bytes:
            return Verdict(quantity, reported, source, measured, "ERROR",
                           f"not monotone: failed at {list(search.non_monotone_at_bytes)} B below the ceiling")
        if search.at_cap:
            notes.append("reached the search cap: the real ceiling may be higher")
        notes.append(f"{search.probes} probes (bound {search.probe_bound})")
        if search.probes > search.probe_bound:
            notes.append("over the probe bound")
    if measured is None:
        return Verdict(quantity, reported, source, None, "ERROR" if search is not None else "info",
                       "; ".join(notes or ["not measured"]))
    if reported is None:
        return Verdict(quantity, None, source, measured, "info", "; ".join(notes or ["nothing reported to compare"]))
    if reported == measured:
        return Verdict(quantity, reported, source, measured, "match", "; ".join(notes))
    diff = measured - reported if isinstance(measured, int) and isinstance(reported, int) else None
    if diff is not None:
        notes.insert(0, f"measured {'+' if diff > 0 else ''}{diff} B against reported")
    return Verdict(quantity, reported, source, measured, "MISMATCH", "; ".join(notes))


def build_verdicts(reported: dict[str, dict[str, Any]], measured: Measured,
                   profile: ArchProfile | None, cc: str | None = None) -> list[Verdict]:
    """Every comparison row for one device, in the order a person reads them."""
    rows: list[Verdict] = []
    for d in disagreements(reported):
        rows.append(Verdict(f"{d.key} agrees across sources", None, "/".join(d.values), None, "MISMATCH",
                            d.describe()))

    default_limit, src = best_value(reported, "max_shared_memory_per_block_bytes")
    rows.append(_compare("default dynamic ceiling (no opt-in)", default_limit, src,
                         measured.default_dynamic_ceiling_bytes, measured.searches.get("default_dynamic_ceiling")))

    optin, optin_src = best_value(reported, "max_shared_memory_per_block_optin_bytes")
    rows.append(_compare("opt-in attribute accepts up to", optin, optin_src, measured.attribute_accept_ceiling_bytes,
                         measured.searches.get("attribute_accept_ceiling")))
    for split in measured.static_splits:
        # The static data costs what it pushes the dynamic array by (alignment included), not its size.
        footprint = split.static_footprint_bytes
        note = ""
        if footprint is None:  # a backend that cannot read shared addresses: the 16-byte rule stands in
            footprint = static_footprint(split.static_bytes)
            note = "footprint not readable on this backend; 16-B alignment of the dynamic array assumed"
        expected = optin - footprint if optin is not None else None
        name = f"optin_dynamic_ceiling/static={split.static_bytes}/threads={split.threads}"
        if footprint != split.static_bytes and not note:
            note = (f"{split.static_bytes} B static occupies {footprint} B (the dynamic array is aligned); "
                    f"opt-in - static would say {optin - split.static_bytes if optin is not None else '?'}")
        rows.append(_compare(f"opt-in dynamic ceiling, {split.static_bytes} B static, {split.threads} threads",
                             expected, f"{optin_src} opt-in - static footprint" if optin_src else None,
                             split.dynamic_ceiling_bytes, measured.searches.get(name), note=note))

    reserved, reserved_src = best_value(reported, "reserved_shared_memory_per_block_bytes")
    rows.append(_compare("reserved shared memory per block", reserved, reserved_src, measured.reserved_bytes,
                         note="" if measured.reserved_bytes is not None else "PTX registers need cc 8.0+"))
    granule = profile.allocation_granularity_bytes if profile else None
    rows.append(_compare("allocation granularity (%total_smem_size)", granule, "published" if granule else None,
                         measured.allocation_granularity_bytes,
                         note="" if measured.allocation_granularity_bytes is not None else "PTX registers need cc 8.0+"))
    regs = measured.registers_at_ceiling
    if regs and regs.get("dynamic_smem_size") is not None:
        rows.append(_compare("%dynamic_smem_size at the opt-in ceiling", measured.optin_dynamic_ceiling_bytes,
                             "requested", regs["dynamic_smem_size"]))
    rows += residency_verdicts(measured.residency)
    if measured.residency:
        per_sm, per_sm_src = best_value(reported, "max_shared_memory_per_multiprocessor_bytes")
        rows.append(_compare("shared memory per SM (2 blocks co-reside)", per_sm, per_sm_src,
                             measured.smem_per_sm_bytes))
    rows += carveout_verdicts(measured.carveout, profile.carveout_kib if profile else None)
    rows += cluster_verdicts(measured)
    rows += published_verdicts(measured, profile, cc)
    rows += validation_verdicts(measured)
    return rows


def cluster_verdicts(measured: Measured) -> list[Verdict]:
    """Cluster rows: the largest launchable size against cuOccupancyMaxPotentialClusterSize, co-resident
    clusters against cuOccupancyMaxActiveClusters, and distributed shared memory read back."""
    if measured.clusters_skipped:
        return [Verdict("thread block clusters", None, None, None, "info", f"skipped: {measured.clusters_skipped}")]
    rows = []
    for c in measured.clusters:
        at = f"at {c.dynamic_bytes} B"
        rows.append(_compare(f"largest cluster {at} (non-portable)", c.api_max_cluster_size,
                             "cuOccupancyMaxPotentialClusterSize", c.max_cluster_size_nonportable))
        rows.append(_compare(f"largest cluster {at} (portable)", portable_cluster_limit(c.api_max_cluster_size),
                             f"min({PORTABLE_CLUSTER_SIZE}, potential size)",
                             c.max_cluster_size_portable))
        for size, counts in sorted(c.active_clusters.items(), key=lambda kv: int(kv[0])):
            rows.append(_compare(f"co-resident clusters of {size} {at}", counts.get("api"),
                                 "cuOccupancyMaxActiveClusters", counts.get("measured")))
        if c.dsm_verified is not None:
            rows.append(Verdict(f"distributed shared memory {at}", None, None,
                                "verified" if c.dsm_verified else "WRONG BYTES",
                                "match" if c.dsm_verified else "MISMATCH",
                                "every block read its neighbour's whole dynamic memory"))
    return rows


def published_verdicts(measured: Measured, profile: ArchProfile | None, cc: str | None) -> list[Verdict]:
    """The device's published row against what was measured. A cc newer than the table is not a mismatch,
    and a difference from an unconfirmed row is information about the table, not about the device."""
    if profile is None:
        return [Verdict("published table", None, None, cc, "info", f"cc {cc} is not in the published table")]
    source = f"published cc {profile.cc_string}" + ("" if profile.confirmed else " (unconfirmed)")
    rows = [
        _compare("published: shared memory per SM", profile.smem_per_sm_bytes, source, measured.smem_per_sm_bytes),
        _compare("published: opt-in per block", profile.max_smem_per_block_optin_bytes, source,
                 measured.optin_dynamic_ceiling_bytes),
        _compare("published: reserved per block", profile.reserved_smem_per_block_bytes, source,
                 measured.reserved_bytes),
    ]
    if not profile.confirmed:
        rows = [Verdict(r.quantity, r.reported, r.source, r.measured, "info", r.note or "unconfirmed row")
                if r.verdict == "MISMATCH" else r for r in rows]
    return rows


def _blocks_text(low: int, high: int) -> str | int:
    return low if low == high else f"{low}..{high}"


def residency_verdicts(steps: tuple[ResidencyStep, ...]) -> list[Verdict]:
    """One row per plateau: measured blocks per SM against the occupancy API and the formula."""
    rows = []
    for step in steps:
        measured = _blocks_text(step.blocks_per_sm_min, step.blocks_per_sm_max)
        notes = [f"formula {step.formula_blocks_per_sm} (limited by {step.limited_by})"]
        agree = step.blocks_per_sm_min == step.blocks_per_sm_max
        if not agree:
            notes.append("SMs differ")
        verdict = "match" if agree and step.blocks_per_sm_min == step.api_blocks_per_sm \
            and step.formula_blocks_per_sm == step.api_blocks_per_sm else "MISMATCH"
        if step.api_blocks_per_sm is None:
            verdict = "info"
        rows.append(Verdict(f"blocks/SM from {step.dynamic_bytes} B dynamic, {step.threads} threads",
                            step.api_blocks_per_sm, "occupancy API", measured, verdict, "; ".join(notes)))
    return rows


def carveout_verdicts(points: tuple[CarveoutPoint, ...], published_kib: tuple[int, ...] | None) -> list[Verdict]:
    """Carveout settings grouped where they behave alike: blocks per SM against the occupancy API, and
    the carveout size residency proves against the published list."""
    rows = []
    groups: list[list[CarveoutPoint]] = []
    for point in points:
        key = (point.blocks_per_sm, point.api_blocks_per_sm, point.carveout_bytes)
        if groups and (groups[-1][-1].blocks_per_sm, groups[-1][-1].api_blocks_per_sm,
                       groups[-1][-1].carveout_bytes) == key and point.percent == groups[-1][-1].percent + 1:
            groups[-1].append(point)
        else:
            groups.append([point])
    for group in groups:
        first, last = group[0], group[-1]
        label = f"{first.percent}%" if first is last else f"{first.percent}..{last.percent}%"
        if first.carveout_bytes is not None:
            note = f"carveout {first.carveout_bytes // 1024} KB"
        elif first.carveout_range_bytes:
            lo, hi = first.carveout_range_bytes
            note = f"carveout in [{lo}, {hi}) B" + (": no published size" if published_kib else "")
        else:
            note = "carveout not measured"
        bad_size = published_kib is not None and first.carveout_bytes is None
        verdict = "MISMATCH" if first.blocks_per_sm != first.api_blocks_per_sm or bad_size else "match"
        if first.api_blocks_per_sm is None and not bad_size:
            verdict = "info"
        rows.append(Verdict(f"blocks/SM at carveout {label}", first.api_blocks_per_sm, "occupancy API",
                            first.blocks_per_sm, verdict, note))
    used = sorted({p.carveout_bytes // 1024 for p in points if p.carveout_bytes is not None})
    unmatched = sorted({p.carveout_range_bytes for p in points if p.carveout_bytes is None and p.carveout_range_bytes})
    if used or unmatched:
        published = ", ".join(map(str, published_kib)) if published_kib else None
        seen = ", ".join([*map(str, used), *(f"{lo / 1024:g}..{hi / 1024:g}" for lo, hi in unmatched)])
        verdict = "info" if not published_kib else ("MISMATCH" if unmatched else "match")
        rows.append(Verdict("carveout sizes seen (KB)", published, "published" if published else None, seen, verdict,
                            "a range is what residency proves where no published size fits" if unmatched else ""))
    return rows
