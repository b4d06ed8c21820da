"""Compare what was measured with what the device reports and with the published table.

Every row has a kind. A *limit* is a launch contract: any difference is ``MISMATCH``. A *prediction*
(an occupancy API count) that the device beats is ``differs``; one it falls short of is ``MISMATCH``,
since a grid sized by the API would wait for blocks that never run. A *reference* (the published table)
is compared where its row is confirmed. Each row carries its family and parameters (core/rows.py).
"""

from __future__ import annotations

from bisect_smem.analysis.compare import compare, predicted, row, search_problem, with_notes
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
from bisect_smem.core.model import CarveoutPoint, Ceiling, Measured, ResidencyStep, StaticSplit
from bisect_smem.core.profiles import ArchProfile, parse_cc
from bisect_smem.core.rows import Conclusion, Family, Note, RowParameters, Verdict, VerdictKind

AVAILABLE_API = "cuOccupancyAvailableDynamicSMemPerBlock"


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
        where = RowParameters(threads=split.threads, static_bytes=split.static_bytes)
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
            rows.append(compare(f"opt-in dynamic ceiling, {label}", expected, source, split.dynamic_ceiling_bytes,
                                search, note=note, family=Family.SPLIT_CEILING, parameters=where))
        if split.dynamic_ceiling_bytes is not None:
            rows.append(compare(f"available dynamic (API), {label}", split.api_available_dynamic_bytes,
                                f"{AVAILABLE_API} (after opt-in)", split.dynamic_ceiling_bytes,
                                note="" if split.api_available_dynamic_bytes is not None
                                else "not available on this backend", family=Family.AVAILABLE_API, parameters=where))
    return rows


def _nothing_launches(quantity: str, split: StaticSplit, footprint: int, optin: int, source: str | None,
                      search: Ceiling | None) -> Verdict:
    why = f"{split.static_bytes} B static needs {footprint} B; the opt-in limit is {optin} B"
    about = {"family": Family.SPLIT_CEILING, "parameters": RowParameters(threads=split.threads,
                                                                         static_bytes=split.static_bytes)}
    problem = search_problem(search) if search is not None else None
    if problem:
        return row(quantity, "nothing", source, split.dynamic_ceiling_bytes, Conclusion.ERROR, [problem], **about)
    if split.dynamic_ceiling_bytes is None:
        return row(quantity, "nothing", source, "nothing", Conclusion.MATCH, [f"nothing launches: {why}"], **about)
    return row(quantity, "nothing", source, split.dynamic_ceiling_bytes, Conclusion.MISMATCH, [f"launched although {why}"],
               **about)


def build_verdicts(reported: ReportedAttributes, measured: Measured,
                   profile: ArchProfile | None, cc: str | None = None) -> list[Verdict]:
    """Every comparison row for one device, in the order a person reads them."""
    rows: list[Verdict] = []
    for key, values in reported.disagreements():
        rows.append(row(f"{key} agrees across sources", None, "/".join(values), None, Conclusion.MISMATCH,
                        [f"{key}: " + ", ".join(f"{src} {val}" for src, val in values.items())], family=Family.SOURCES))
    rows += ceiling_verdicts(reported, measured)
    rows += split_verdicts(measured.static_splits, measured, *reported.best("max_shared_memory_per_block_optin_bytes"))
    rows += register_verdicts(reported, measured, profile, cc)
    rows += residency_verdicts(measured.residency)
    if measured.residency:
        per_sm, per_sm_src = reported.best("max_shared_memory_per_multiprocessor_bytes")
        rows.append(compare("shared memory per SM (2 blocks fit)", per_sm, per_sm_src, measured.smem_per_sm_bytes,
                            family=Family.SMEM_PER_SM))
    rows += carveout_verdicts(measured.carveout, profile.carveout_kib if profile else None)
    rows += cluster_verdicts(measured)
    rows += published_verdicts(measured, profile, cc)
    rows += validation_verdicts(measured)
    return rows


def ceiling_verdicts(reported: ReportedAttributes, measured: Measured) -> list[Verdict]:
    """The default ceiling (and the API beside it) and the attribute's accept ceiling against the attributes."""
    default_limit, src = reported.best("max_shared_memory_per_block_bytes")
    rows = [compare("default dynamic ceiling (no opt-in)", default_limit, src, measured.default_dynamic_ceiling_bytes,
                    measured.searches.get("default_dynamic_ceiling"), family=Family.DEFAULT_CEILING)]
    if measured.default_dynamic_ceiling_bytes is not None:
        available = measured.default_api_available_dynamic_bytes
        rows.append(compare("available dynamic (API), default (no opt-in)", available,
                            f"{AVAILABLE_API} (before opt-in)", measured.default_dynamic_ceiling_bytes,
                            note="" if available is not None else "not available on this backend",
                            family=Family.AVAILABLE_API))
    optin, optin_src = reported.best("max_shared_memory_per_block_optin_bytes")
    rows.append(compare("opt-in attribute accepts up to", optin, optin_src, measured.attribute_accept_ceiling_bytes,
                        measured.searches.get("attribute_accept_ceiling"), family=Family.ATTRIBUTE_ACCEPT))
    return rows


def register_verdicts(reported: ReportedAttributes, measured: Measured, profile: ArchProfile | None,
                      cc: str | None) -> list[Verdict]:
    """Attribute 150 (reported only), and what the PTX registers showed: reserved bytes, granularity, and
    the dynamic size at the opt-in ceiling."""
    oversized = reported.driver.max_oversized_shared_memory_per_block_bytes if reported.driver else None
    rows = [row("oversized smem per block (attr 150)", oversized, "driver", None, Conclusion.INFO,
                ["reported only" if oversized is not None else "not known by this driver"], family=Family.OVERSIZED)]
    reserved, reserved_src = reported.best("reserved_shared_memory_per_block_bytes")
    rows.append(compare("reserved shared memory per block", reserved, reserved_src, measured.reserved_bytes,
                        note="" if measured.reserved_bytes is not None else _not_measured_note(cc),
                        family=Family.RESERVED))
    granule = profile.allocation_granularity_bytes if profile else None
    rows.append(compare("granularity (%total_smem_size)", granule, "published" if granule else None,
                        measured.allocation_granularity_bytes,
                        note="" if measured.allocation_granularity_bytes is not None else _not_measured_note(cc),
                        family=Family.GRANULARITY))
    regs = measured.registers_at_ceiling
    if regs and regs.get("dynamic_smem_size") is not None:
        rows.append(compare("%dynamic_smem_size at opt-in ceiling", measured.optin_dynamic_ceiling_bytes,
                            "requested", regs["dynamic_smem_size"], family=Family.DYNAMIC_REGISTER))
    return rows


def cluster_verdicts(measured: Measured) -> list[Verdict]:
    """Cluster rows: the largest launchable size against cuOccupancyMaxPotentialClusterSize (a limit),
    co-resident clusters against cuOccupancyMaxActiveClusters (a prediction), and distributed shared
    memory read back."""
    if measured.clusters_skipped:
        return [row("thread block clusters", None, None, None, Conclusion.INFO, [f"skipped: {measured.clusters_skipped}"],
                    family=Family.CLUSTERS_SKIPPED)]
    rows = []
    for c in measured.clusters:
        at, where = f"at {c.dynamic_bytes} B", RowParameters(dynamic_bytes=c.dynamic_bytes)
        rows.append(compare(f"largest cluster {at} (non-portable)", c.api_max_cluster_size,
                            "cuOccupancyMaxPotentialClusterSize", c.max_cluster_size_nonportable,
                            family=Family.CLUSTER_LARGEST, parameters=where))
        rows.append(compare(f"largest cluster {at} (portable)", portable_cluster_limit(c.api_max_cluster_size),
                            f"min({PORTABLE_CLUSTER_SIZE}, potential size)", c.max_cluster_size_portable,
                            family=Family.CLUSTER_LARGEST, parameters=where))
        for size, counts in sorted(c.active_clusters.items(), key=lambda kv: int(kv[0])):
            rows.append(predicted(f"co-resident clusters of {size} {at}", counts.get("api"),
                                  "cuOccupancyMaxActiveClusters", counts.get("measured"), family=Family.CLUSTER_ACTIVE,
                                  parameters=RowParameters(dynamic_bytes=c.dynamic_bytes, cluster_size=int(size))))
        if c.dsm_verified is not None:
            rows.append(row(f"distributed shared memory {at}", None, None,
                            "verified" if c.dsm_verified else "WRONG BYTES", Conclusion.MATCH if c.dsm_verified else Conclusion.MISMATCH,
                            ["every block read its neighbour's whole dynamic memory"], family=Family.CLUSTER_DSM,
                            parameters=where))
    return rows


def published_verdicts(measured: Measured, profile: ArchProfile | None, cc: str | None) -> list[Verdict]:
    """The device's published row against what was measured. A cc newer than the table is not a mismatch,
    and a difference from an unconfirmed row is information about the table, not about the device."""
    if profile is None:
        return [row("published table", None, None, cc, Conclusion.INFO, [f"cc {cc} is not in the published table"],
                    VerdictKind.REFERENCE, Family.NOT_PUBLISHED)]
    source = f"published cc {profile.cc_string}" + ("" if profile.confirmed else " (unconfirmed)")
    rows = [
        compare("published: shared memory per SM", profile.smem_per_sm_bytes, source, measured.smem_per_sm_bytes,
                kind=VerdictKind.REFERENCE, family=Family.PUBLISHED_SMEM_PER_SM),
        compare("published: opt-in per block", profile.max_smem_per_block_optin_bytes, source,
                measured.optin_dynamic_ceiling_bytes, kind=VerdictKind.REFERENCE, family=Family.PUBLISHED_OPTIN),
        compare("published: reserved per block", profile.reserved_smem_per_block_bytes, source,
                measured.reserved_bytes, kind=VerdictKind.REFERENCE, family=Family.PUBLISHED_RESERVED),
    ]
    if not profile.confirmed:
        rows = [with_notes(r, r.notes or ["unconfirmed row"], Conclusion.INFO) if r.verdict == Conclusion.MISMATCH else r
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
        v = predicted(f"blocks/SM from {step.dynamic_bytes} B dynamic, {step.threads} threads", step.api_blocks_per_sm,
                      "occupancy API", step.blocks_per_sm_min, step.blocks_per_sm_max, notes, Family.RESIDENCY,
                      RowParameters(threads=step.threads, dynamic_bytes=step.dynamic_bytes))
        if v.verdict in (Conclusion.MATCH, Conclusion.DIFFERS) and step.formula_blocks_per_sm != step.api_blocks_per_sm:
            v = with_notes(v, [f"the formula says {step.formula_blocks_per_sm}, the API {step.api_blocks_per_sm}",
                               *v.notes], Conclusion.MISMATCH)
        rows.append(v)
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


def _carveout_note(point: CarveoutPoint, published: bool) -> Note:
    """The carveout size a setting gives, or the range residency proves (the compact table drops the word)."""
    if point.carveout_bytes is not None:
        return Note(f"carveout {_kib(point.carveout_bytes)} KiB")
    if point.carveout_range_bytes:
        lo, hi = point.carveout_range_bytes
        text = f"[{_kib(lo)}, {_kib(hi)}) KiB" + (", unpublished" if published else "")
        return Note(f"carveout {text}", short=text)
    return Note("carveout not measured")


def carveout_verdicts(points: tuple[CarveoutPoint, ...], published_kib: tuple[int, ...] | None) -> list[Verdict]:
    """Carveout settings grouped where they behave alike: blocks per SM against the occupancy API (a
    prediction), and the carveout size residency proves against the published list. The carveout is a
    hint: more blocks than predicted, or a size the list does not have, is ``differs``."""
    rows = []
    for group in _carveout_groups(points):
        first, last = group[0], group[-1]
        label = f"{first.percent}%" if first is last else f"{first.percent}..{last.percent}%"
        v = predicted(f"blocks/SM at carveout {label}", first.api_blocks_per_sm, "occupancy API", first.blocks_per_sm,
                      notes=[_carveout_note(first, bool(published_kib))], family=Family.CARVEOUT,
                      parameters=RowParameters(percent=first.percent, last_percent=last.percent))
        if v.verdict == Conclusion.MATCH and published_kib is not None and first.carveout_bytes is None:
            v = with_notes(v, v.notes, Conclusion.DIFFERS)
        rows.append(v)
    used = sorted({p.carveout_bytes // 1024 for p in points if p.carveout_bytes is not None})
    unmatched = sorted({p.carveout_range_bytes for p in points if p.carveout_bytes is None and p.carveout_range_bytes})
    if used or unmatched:
        published = [str(k) for k in published_kib] if published_kib else []
        seen = [*map(str, used), *(f"{_kib(lo)}..{_kib(hi)}" for lo, hi in unmatched)]
        verdict = Conclusion.INFO if not published_kib else (Conclusion.DIFFERS if unmatched else Conclusion.MATCH)
        rows.append(row("carveout sizes seen (KB)", ", ".join(published) or None, "published" if published else None,
                        ", ".join(seen), verdict, ["no published size in any measured range"] if unmatched else [],
                        VerdictKind.REFERENCE, Family.CARVEOUT_SIZES, reported_items=tuple(published),
                        measured_items=tuple(seen)))
    return rows
