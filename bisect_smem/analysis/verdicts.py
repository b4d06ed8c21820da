"""Compare what was measured with what the device reports and with the published table.

Every row has a kind. A *limit* is a launch contract: any difference is ``MISMATCH``. A *prediction*
(an occupancy API count) that the device beats is ``differs``; one it falls short of is ``MISMATCH``,
since a grid sized by the API would wait for blocks that never run. A *reference* (the published table)
is compared where its row is confirmed. A row is ``match`` only when the measured number is exact and
its search was trustworthy (boundary confirmed, monotone, within its probe bound): an untrustworthy
search is an ERROR row, never a match.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bisect_smem.analysis.integrity_verdicts import validation_verdicts
from bisect_smem.core.attributes import ReportedAttributes
from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import (
    PORTABLE_CLUSTER_SIZE,
    has_smem_registers,
    portable_cluster_limit,
    static_footprint,
)
from bisect_smem.core.levels import split_search_name
from bisect_smem.core.model import CarveoutPoint, Ceiling, Measured, ResidencyStep, StaticSplit, Verdict
from bisect_smem.core.profiles import ArchProfile, parse_cc

AVAILABLE_API = "cuOccupancyAvailableDynamicSMemPerBlock"


def _search_problem(search: Ceiling) -> str | None:
    """Why a search's number cannot be trusted, or None."""
    if search.error:
        return search.error
    if search.unstable_range_bytes:
        lo, hi = search.unstable_range_bytes
        return "unstable: " + (f"{lo} B both launched and failed" if lo == hi else
                               f"failures from {lo} B, successes up to {hi} B")
    if search.non_monotone_at_bytes:
        return f"not monotone: failed at {list(search.non_monotone_at_bytes)} B below the ceiling"
    return None


def _compare(quantity: str, reported: Any, source: str | None, measured: Any, search: Ceiling | None = None,
             note: str = "", kind: str = "limit") -> Verdict:
    notes = [note] if note else []
    if search is not None:
        problem = _search_problem(search)
        if problem:
            return Verdict(quantity, reported, source, measured, "ERROR", problem, kind)
        if search.at_cap:
            notes.append("reached the search cap: the real ceiling may be higher")
        notes.append(f"{search.probes} probes (bound {search.probe_bound})")
        if search.probes > search.probe_bound:
            notes.append("over the probe bound")
    if measured is None:
        return Verdict(quantity, reported, source, None, "ERROR" if search is not None else "info",
                       "; ".join(notes or ["not measured"]), kind)
    if reported is None:
        return Verdict(quantity, None, source, measured, "info", "; ".join(notes or ["nothing reported to compare"]),
                       kind)
    if reported == measured:
        return Verdict(quantity, reported, source, measured, "match", "; ".join(notes), kind)
    diff = measured - reported if isinstance(measured, int) and isinstance(reported, int) else None
    if diff is not None:
        notes.insert(0, f"measured {'+' if diff > 0 else ''}{diff} B against reported")
    return Verdict(quantity, reported, source, measured, "MISMATCH", "; ".join(notes), kind)


def _predicted(quantity: str, api: int | None, source: str, low: int | None, high: int | None = None,
               note: str = "") -> Verdict:
    """A count the API predicts against what ran: fewer is MISMATCH, more is ``differs``."""
    high = low if high is None else high
    measured: int | str | None = low if low == high else f"{low}..{high}"
    notes = [note] if note else []
    if low is None or high is None:
        return Verdict(quantity, api, source, None, "info", "; ".join(notes or ["not measured"]), "prediction")
    if api is None:
        return Verdict(quantity, None, source, measured, "info", "; ".join(notes or ["no prediction to compare"]),
                       "prediction")
    if low < api:
        notes.insert(0, f"{api - low} fewer than the API: a grid sized by it would wait")
        return Verdict(quantity, api, source, measured, "MISMATCH", "; ".join(notes), "prediction")
    if high > api:
        notes.insert(0, f"{high - api} more than the API")
        return Verdict(quantity, api, source, measured, "differs", "; ".join(notes), "prediction")
    return Verdict(quantity, api, source, measured, "match", "; ".join(notes), "prediction")


def _not_measured_note(cc: str | None) -> str:
    """Why the PTX registers gave nothing: the cc lacks them, or the step did not complete."""
    try:
        version = parse_cc(cc) if cc is not None else ()
    except UsageError:
        version = ()
    if version and not has_smem_registers(version):
        return f"PTX registers need cc 8.0+ (this device: cc {cc})"
    return "not measured: the block-register step did not complete (see the step rows)"


def split_verdicts(splits: tuple[StaticSplit, ...], measured: Measured, optin: int | None,
                   optin_src: str | None) -> list[Verdict]:
    """One row per static split against opt-in minus the static footprint, and one against what
    cuOccupancyAvailableDynamicSMemPerBlock says is available at one block per SM."""
    rows = []
    for split in splits:
        label = f"{split.static_bytes} B static, {split.threads} threads"
        # The static data costs what it pushes the dynamic array by (alignment included), not its size.
        footprint = split.static_footprint_bytes
        note = ""
        if footprint is None:  # a backend that cannot read shared addresses: the 16-byte rule stands in
            footprint = static_footprint(split.static_bytes)
            note = "footprint not readable on this backend; 16-B alignment of the dynamic array assumed"
        expected: int | str | None = optin - footprint if optin is not None else None
        search = measured.searches.get(split_search_name(split.static_bytes, split.threads))
        source = f"{optin_src} - footprint" if optin_src else None
        if isinstance(expected, int) and expected < 0:
            # No dynamic size launches at all: an expected ceiling below 0 is "nothing", not a number.
            rows.append(_nothing_launches(f"opt-in dynamic ceiling, {label}", split, footprint, optin, source, search))
        else:
            if footprint != split.static_bytes and not note:
                note = f"{split.static_bytes} B static occupies {footprint} B (aligned)"
            rows.append(_compare(f"opt-in dynamic ceiling, {label}", expected, source, split.dynamic_ceiling_bytes,
                                 search, note=note))
        if split.dynamic_ceiling_bytes is not None:
            rows.append(_compare(f"available dynamic (API), {label}", split.api_available_dynamic_bytes,
                                 f"{AVAILABLE_API} (after opt-in)", split.dynamic_ceiling_bytes,
                                 note="" if split.api_available_dynamic_bytes is not None
                                 else "not available on this backend"))
    return rows


def _nothing_launches(quantity: str, split: StaticSplit, footprint: int, optin: int, source: str | None,
                      search: Ceiling | None) -> Verdict:
    why = f"{split.static_bytes} B static needs {footprint} B; the opt-in limit is {optin} B"
    problem = _search_problem(search) if search is not None else None
    if problem:
        return Verdict(quantity, "nothing", source, split.dynamic_ceiling_bytes, "ERROR", problem)
    if split.dynamic_ceiling_bytes is None:
        return Verdict(quantity, "nothing", source, "nothing", "match", f"nothing launches: {why}")
    return Verdict(quantity, "nothing", source, split.dynamic_ceiling_bytes, "MISMATCH",
                   f"launched although {why}")


def build_verdicts(reported: ReportedAttributes, measured: Measured,
                   profile: ArchProfile | None, cc: str | None = None) -> list[Verdict]:
    """Every comparison row for one device, in the order a person reads them."""
    rows: list[Verdict] = []
    for key, values in reported.disagreements():
        rows.append(Verdict(f"{key} agrees across sources", None, "/".join(values), None, "MISMATCH",
                            f"{key}: " + ", ".join(f"{src} {val}" for src, val in values.items())))

    default_limit, src = reported.best("max_shared_memory_per_block_bytes")
    rows.append(_compare("default dynamic ceiling (no opt-in)", default_limit, src,
                         measured.default_dynamic_ceiling_bytes, measured.searches.get("default_dynamic_ceiling")))
    if measured.default_dynamic_ceiling_bytes is not None:
        available = measured.default_api_available_dynamic_bytes
        rows.append(_compare("available dynamic (API), default (no opt-in)", available, f"{AVAILABLE_API} (before opt-in)",
                             measured.default_dynamic_ceiling_bytes,
                             note="" if available is not None else "not available on this backend"))

    optin, optin_src = reported.best("max_shared_memory_per_block_optin_bytes")
    rows.append(_compare("opt-in attribute accepts up to", optin, optin_src, measured.attribute_accept_ceiling_bytes,
                         measured.searches.get("attribute_accept_ceiling")))
    rows += split_verdicts(measured.static_splits, measured, optin, optin_src)

    oversized = reported.driver.max_oversized_shared_memory_per_block_bytes if reported.driver else None
    rows.append(Verdict("oversized smem per block (attr 150)", oversized, "driver", None, "info",
                        "reported only" if oversized is not None else "not known by this driver"))
    reserved, reserved_src = reported.best("reserved_shared_memory_per_block_bytes")
    rows.append(_compare("reserved shared memory per block", reserved, reserved_src, measured.reserved_bytes,
                         note="" if measured.reserved_bytes is not None else _not_measured_note(cc)))
    granule = profile.allocation_granularity_bytes if profile else None
    rows.append(_compare("granularity (%total_smem_size)", granule, "published" if granule else None,
                         measured.allocation_granularity_bytes,
                         note="" if measured.allocation_granularity_bytes is not None else _not_measured_note(cc)))
    regs = measured.registers_at_ceiling
    if regs and regs.get("dynamic_smem_size") is not None:
        rows.append(_compare("%dynamic_smem_size at opt-in ceiling", measured.optin_dynamic_ceiling_bytes,
                             "requested", regs["dynamic_smem_size"]))
    rows += residency_verdicts(measured.residency)
    if measured.residency:
        per_sm, per_sm_src = reported.best("max_shared_memory_per_multiprocessor_bytes")
        rows.append(_compare("shared memory per SM (2 blocks fit)", per_sm, per_sm_src,
                             measured.smem_per_sm_bytes))
    rows += carveout_verdicts(measured.carveout, profile.carveout_kib if profile else None)
    rows += cluster_verdicts(measured)
    rows += published_verdicts(measured, profile, cc)
    rows += validation_verdicts(measured)
    return rows


def cluster_verdicts(measured: Measured) -> list[Verdict]:
    """Cluster rows: the largest launchable size against cuOccupancyMaxPotentialClusterSize (a limit),
    co-resident clusters against cuOccupancyMaxActiveClusters (a prediction), and distributed shared
    memory read back."""
    if measured.clusters_skipped:
        return [Verdict("thread block clusters", None, None, None, "info", f"skipped: {measured.clusters_skipped}")]
    rows = []
    for c in measured.clusters:
        at = f"at {c.dynamic_bytes} B"
        rows.append(_compare(f"largest cluster {at} (non-portable)", c.api_max_cluster_size,
                             "cuOccupancyMaxPotentialClusterSize", c.max_cluster_size_nonportable))
        rows.append(_compare(f"largest cluster {at} (portable)", portable_cluster_limit(c.api_max_cluster_size),
                             f"min({PORTABLE_CLUSTER_SIZE}, potential size)", c.max_cluster_size_portable))
        for size, counts in sorted(c.active_clusters.items(), key=lambda kv: int(kv[0])):
            rows.append(_predicted(f"co-resident clusters of {size} {at}", counts.get("api"),
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
        return [Verdict("published table", None, None, cc, "info", f"cc {cc} is not in the published table",
                        "reference")]
    source = f"published cc {profile.cc_string}" + ("" if profile.confirmed else " (unconfirmed)")
    rows = [
        _compare("published: shared memory per SM", profile.smem_per_sm_bytes, source, measured.smem_per_sm_bytes,
                 kind="reference"),
        _compare("published: opt-in per block", profile.max_smem_per_block_optin_bytes, source,
                 measured.optin_dynamic_ceiling_bytes, kind="reference"),
        _compare("published: reserved per block", profile.reserved_smem_per_block_bytes, source,
                 measured.reserved_bytes, kind="reference"),
    ]
    if not profile.confirmed:
        rows = [replace(r, verdict="info", note=r.note or "unconfirmed row") if r.verdict == "MISMATCH" else r
                for r in rows]
    return rows


def residency_verdicts(steps: tuple[ResidencyStep, ...]) -> list[Verdict]:
    """One row per plateau: measured blocks per SM against the occupancy API (a prediction); the formula
    from the reported limits disagreeing with the API is a disagreement of sources (MISMATCH)."""
    rows = []
    for step in steps:
        notes = [f"formula {step.formula_blocks_per_sm} (limited by {step.limited_by})"]
        if step.blocks_per_sm_min != step.blocks_per_sm_max:
            notes.append("SMs differ")
        row = _predicted(f"blocks/SM from {step.dynamic_bytes} B dynamic, {step.threads} threads",
                         step.api_blocks_per_sm, "occupancy API", step.blocks_per_sm_min, step.blocks_per_sm_max,
                         "; ".join(notes))
        if row.verdict in ("match", "differs") and step.formula_blocks_per_sm != step.api_blocks_per_sm:
            row = replace(row, verdict="MISMATCH", note=f"the formula says {step.formula_blocks_per_sm}, the API "
                                                             f"{step.api_blocks_per_sm}; {row.note}")
        rows.append(row)
    return rows


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:g}"


def _carveout_groups(points: tuple[CarveoutPoint, ...]) -> list[list[CarveoutPoint]]:
    """Consecutive settings that behave alike (count, prediction, size) form one group."""
    groups: list[list[CarveoutPoint]] = []
    for point in points:
        key = (point.blocks_per_sm, point.api_blocks_per_sm, point.carveout_bytes)
        last = groups[-1][-1] if groups else None
        if last is not None and (last.blocks_per_sm, last.api_blocks_per_sm, last.carveout_bytes) == key \
                and point.percent == last.percent + 1:
            groups[-1].append(point)
        else:
            groups.append([point])
    return groups


def carveout_verdicts(points: tuple[CarveoutPoint, ...], published_kib: tuple[int, ...] | None) -> list[Verdict]:
    """Carveout settings grouped where they behave alike: blocks per SM against the occupancy API (a
    prediction), and the carveout size residency proves against the published list. The carveout is a
    hint: more blocks than predicted, or a size the list does not have, is ``differs``."""
    rows = []
    for group in _carveout_groups(points):
        first, last = group[0], group[-1]
        label = f"{first.percent}%" if first is last else f"{first.percent}..{last.percent}%"
        if first.carveout_bytes is not None:
            note = f"carveout {_kib(first.carveout_bytes)} KiB"
        elif first.carveout_range_bytes:
            lo, hi = first.carveout_range_bytes
            note = f"carveout [{_kib(lo)}, {_kib(hi)}) KiB" + (", unpublished" if published_kib else "")
        else:
            note = "carveout not measured"
        row = _predicted(f"blocks/SM at carveout {label}", first.api_blocks_per_sm, "occupancy API",
                         first.blocks_per_sm, note=note)
        if row.verdict == "match" and published_kib is not None and first.carveout_bytes is None:
            row = replace(row, verdict="differs")
        rows.append(row)
    used = sorted({p.carveout_bytes // 1024 for p in points if p.carveout_bytes is not None})
    unmatched = sorted({p.carveout_range_bytes for p in points if p.carveout_bytes is None and p.carveout_range_bytes})
    if used or unmatched:
        published = ", ".join(map(str, published_kib)) if published_kib else None
        seen = ", ".join([*map(str, used), *(f"{_kib(lo)}..{_kib(hi)}" for lo, hi in unmatched)])
        verdict = "info" if not published_kib else ("differs" if unmatched else "match")
        rows.append(Verdict("carveout sizes seen (KB)", published, "published" if published else None, seen, verdict,
                            "no published size in any measured range" if unmatched else "",
                            "reference"))
    return rows
