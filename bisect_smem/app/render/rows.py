"""What every rendering of a report shows, as data: per device its header, its headline (the answer) and
its table rows, compact or all of them, and the closing lines after several devices.

The compact rows fold rows that agree across thread counts into one and each family of predictions
(residency staircase, carveout sweep, clusters) into one summary row unless something in it disagrees.
Everything here reads the rows' families, parameters and typed notes (core/rows.py), never their text.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from bisect_smem.app.render.width import DEFAULT_WIDTH
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import KIB
from bisect_smem.core.levels import REFERENCE_STATIC_BYTES, REFERENCE_THREADS, split_search_name
from bisect_smem.core.model import DeviceReport, Measured, Report
from bisect_smem.core.rows import Family, NoteKind, RowParameters, Verdict
from bisect_smem.core.text import printable

WIDTH = DEFAULT_WIDTH  # a report's text where no narrower terminal asks for less
HEADLINE_LINES = 12
HEADLINE_INDENT = 21  # two spaces, then the labels' column
VERDICT_ORDER = ("match", "differs", "MISMATCH", "ERROR", "info")
AGREEING = ("match", "info")
# Families shown as one summary row when every row in them agrees.
SUMMARIES: dict[Family, str] = {
    Family.AVAILABLE_API: "available dynamic (API)", Family.RESIDENCY: "residency staircase",
    Family.CARVEOUT: "carveout sweep", Family.CLUSTER_LARGEST: "thread block clusters",
    Family.CLUSTER_ACTIVE: "thread block clusters", Family.CLUSTER_DSM: "thread block clusters",
    Family.PUBLISHED_SMEM_PER_SM: "published table", Family.PUBLISHED_OPTIN: "published table",
    Family.PUBLISHED_RESERVED: "published table",
}


def _percent(p: RowParameters) -> str:
    return f"{p.percent}%" if p.percent == p.last_percent else f"{p.percent}..{p.last_percent}%"


# Families whose rows the headline names together: the family's name, and what tells its rows apart.
REASON_GROUPS: dict[Family, tuple[str, Callable[[RowParameters], str]]] = {
    Family.CARVEOUT: ("blocks/SM at carveout", _percent),
    Family.CLUSTER_ACTIVE: ("co-resident clusters of", lambda p: f"{p.cluster_size} at {p.dynamic_bytes} B"),
    Family.RESIDENCY: ("blocks/SM from", lambda p: f"{p.dynamic_bytes} B dynamic, {p.threads} threads"),
}
# The compact names of rows that differ by their block size only, without it.
FOLDED_NAMES: dict[Family, Callable[[RowParameters], str]] = {
    Family.SPLIT_CEILING: lambda p: f"opt-in ceiling, {p.static_bytes} B static",
    Family.AVAILABLE_API: lambda p: f"available dynamic (API), {p.static_bytes} B static",
    Family.RESIDENCY: lambda p: f"blocks/SM from {p.dynamic_bytes} B dynamic",
}


@frozen
class RenderOptions:
    """How a report is shown: every row (``verbose``), whether ``differs`` fails the run (``strict``), and
    the most columns a line of text may take (``width``)."""

    verbose: bool = False
    strict: bool = False
    width: int = WIDTH


DEFAULT_OPTIONS = RenderOptions()


@frozen
class Shown:
    """A row as a table shows it: the cells, and the family it was made from (None: a summary)."""

    quantity: str
    reported: object
    source: str | None
    measured: object
    verdict: str
    note: str
    kind: str
    family: Family | None = None

    @classmethod
    def of(cls, v: Verdict) -> Shown:
        """Every cell of the row as it is."""
        return cls(v.quantity, v.reported, v.source, v.measured, v.verdict, v.note, v.kind, v.family)


def size_text(nbytes: int | None) -> str:
    """``227 KiB (232448 B)``; sizes under 1 KiB in bytes only; ``-`` for unknown."""
    if nbytes is None:
        return "-"
    if abs(nbytes) < KIB:
        return f"{nbytes} B"
    kib = f"{nbytes // KIB}" if nbytes % KIB == 0 else f"{nbytes / KIB:.2f}"
    return f"{kib} KiB ({nbytes} B)"


def device_verdict(dev: DeviceReport) -> str:
    """The device's overall verdict: MISMATCH, else ERROR when incomplete, else differs, else match."""
    if dev.mismatches:
        return "MISMATCH"
    if dev.incomplete:
        return "ERROR"
    return "differs" if dev.differences else "match"


def header_lines(dev: DeviceReport) -> list[str]:
    """Two lines naming the device and the context that explains differences."""
    ctx = dev.context
    cuda = ctx.cuda_driver_version
    cuda_text = f" (CUDA {cuda // 1000}.{cuda % 1000 // 10})" if isinstance(cuda, int) and cuda else ""
    first = f"device {dev.index}: {dev.name or 'unknown device'} | cc {dev.compute_capability or '?'} | " \
            f"UUID {ctx.nvml_uuid or 'unknown'}"
    second = " | ".join([f"driver {ctx.nvml_driver_version or 'unknown'}{cuda_text}",
                         f"virtualization {ctx.nvml_virtualization_mode or 'unknown'}",
                         f"MIG {ctx.nvml_mig_mode or 'unknown'}", f"backend {dev.backend}"])
    return [printable(first), printable(second)]  # names from a device or a file stay on their line


def compact_rows(dev: DeviceReport) -> list[Shown]:
    """The rows of the compact table: thread counts folded, agreeing families summarised in place."""
    rows = _fold_threads(list(dev.verdicts))
    out: list[Shown] = []
    placed: set[str] = set()
    for v in rows:
        name = SUMMARIES.get(v.family) if v.family is not None else None
        if name is None:
            out.append(v)
            continue
        if name in placed:
            continue
        placed.add(name)
        members = [r for r in rows if r.family is not None and SUMMARIES.get(r.family) == name]
        agreeing = [r for r in members if r.verdict in AGREEING]
        out += [r for r in members if r.verdict not in AGREEING]
        if agreeing:
            out.append(_summary(name if len(agreeing) == len(members) else f"{name}, the rest", agreeing))
    return out


def _compact(v: Verdict) -> Shown:
    """A row as the compact table shows it: shorter name, no probe counts, long lists cut to the news."""
    reported, measured = v.reported, v.measured
    if len(v.reported_items) > 1 and len(v.measured_items) > 1:
        extra = [item for item in v.measured_items if item not in v.reported_items]
        reported, measured = f"{len(v.reported_items)} sizes", ", ".join(extra) if extra else "all published"
    # The probe counts and by how much a prediction was beaten (the columns show it) are left out.
    note = "; ".join(n.short or n.text for n in v.notes if n.kind is NoteKind.REMARK) if v.notes else v.note
    name = FOLDED_NAMES[v.family](v.parameters) + f", {v.parameters.threads} threads" \
        if v.family in FOLDED_NAMES and v.parameters.threads is not None else v.quantity
    return Shown(name, reported, v.source, measured, v.verdict, note, v.kind, v.family)


def _fold_threads(rows: list[Verdict]) -> list[Shown]:
    """Rows that differ only in their thread count, and agree, become one row; the counts go to the note."""
    out: list[Shown] = []
    threads: dict[int, list[int]] = {}
    keys: dict[tuple, int] = {}
    for v in rows:
        shown = _compact(v)
        if v.family not in FOLDED_NAMES or v.parameters.threads is None:
            out.append(shown)
            continue
        folded = replace(shown, quantity=FOLDED_NAMES[v.family](v.parameters))
        key = (folded.quantity, folded.reported, folded.source, folded.measured, folded.verdict, folded.note)
        if key not in keys:
            keys[key] = len(out)
            out.append(folded)
        threads.setdefault(keys[key], []).append(v.parameters.threads)
    for at, counts in threads.items():
        v = out[at]
        if len(counts) == 1:  # nothing folded: the row keeps its own name
            out[at] = replace(v, quantity=f"{v.quantity}, {counts[0]} threads")
            continue
        note = "; ".join(part for part in (f"{'/'.join(map(str, counts))} threads", v.note) if part)
        out[at] = replace(v, note=note)
    return out


def _summary(name: str, rows: list[Shown]) -> Shown:
    verdicts = {v.verdict for v in rows}
    sources = sorted({v.source for v in rows if v.source})
    return Shown(f"{name} ({len(rows)} rows)", None, sources[0] if len(sources) == 1 else None, None,
                 "match" if "match" in verdicts else "info",
                 "all agree" if verdicts == {"match"} else "agree or nothing to compare", rows[0].kind)


def shown_rows(dev: DeviceReport, verbose: bool) -> list[Shown]:
    """Every row (``verbose``), or the compact ones."""
    return [Shown.of(v) for v in dev.verdicts] if verbose else compact_rows(dev)


@frozen
class DeviceSection:
    """What every format shows of one device, in order: header, headline, rows and their summary line
    (none of the three where the device has no rows), its error and its events."""

    header: tuple[str, str]
    headline: tuple[tuple[str, str], ...]
    rows: tuple[Shown, ...]
    summary: str | None
    error: str | None
    events: tuple[tuple[str, str], ...]  # (what, where)


def sections(report: Report, options: RenderOptions) -> list[DeviceSection]:
    """One section per device of the report."""
    out = []
    for dev in report.devices:
        first, second = header_lines(dev)
        measured = bool(dev.verdicts)
        out.append(DeviceSection(
            (first, second), tuple(headline(dev, options.strict, options.width)) if measured else (),
            tuple(shown_rows(dev, options.verbose)) if measured else (), device_summary(dev) if measured else None,
            printable(dev.error) if dev.error else None,
            tuple((printable(e.get("what")), printable(e.get("where"))) for e in dev.events)))
    return out


def _static_cost(dev: DeviceReport) -> str:
    splits = [s for s in (dev.measured.static_splits if dev.measured else ()) if s.static_bytes]
    known = sorted({(s.static_bytes, s.static_footprint_bytes) for s in splits if s.static_footprint_bytes is not None})
    if not known:
        launched = any(s.dynamic_ceiling_bytes is not None for s in splits)
        return "footprint not readable on this backend" if launched else "not measured"
    static, footprint = known[0]
    if footprint == static:
        return f"{static} B static costs {static} B of the opt-in budget"
    return f"{static} B static costs {footprint} B of the opt-in budget (the dynamic array is 16-B aligned)"


def _largest_cluster(dev: DeviceReport) -> str:
    m = dev.measured
    if m is None or m.clusters_skipped:
        return f"skipped: {m.clusters_skipped}" if m is not None else "not measured"
    launched = [c for c in m.clusters if c.max_cluster_size_nonportable]
    if not launched:
        return "not measured"
    biggest = max(c.max_cluster_size_nonportable or 0 for c in launched)
    portable = max(c.max_cluster_size_portable or 0 for c in launched)
    upto = max(c.dynamic_bytes for c in launched if c.max_cluster_size_nonportable == biggest)
    return f"{biggest} blocks ({portable} portable), up to {size_text(upto)} per block"


def _reason_group(v: Verdict) -> tuple[str, str]:
    """The name a row goes under in the headline's reasons, and what tells it apart there."""
    if v.family in REASON_GROUPS:
        name, part = REASON_GROUPS[v.family]
        return name, part(v.parameters)
    return v.quantity, ""


def _reasons(dev: DeviceReport, room: int, width: int = WIDTH) -> list[str]:
    """One line per family of rows that are not ``match``/``info``: the why of the verdict."""
    grouped: dict[tuple[str, str], list[Verdict]] = {}
    for v in dev.verdicts:
        if v.verdict in ("differs", "MISMATCH", "ERROR"):
            grouped.setdefault((v.verdict, _reason_group(v)[0]), []).append(v)
    if dev.error and not any(v.verdict == "ERROR" for v in dev.verdicts):
        grouped[("ERROR", dev.error)] = []
    lines: list[str] = []
    for (verdict, family), rows in grouped.items():
        parts = [part for part in (_reason_group(v)[1] for v in rows) if part]
        first = (rows[0].notes[0].text if rows[0].notes else rows[0].note) if rows else ""
        why = f": {first}" if first else ""
        room_for_parts = width - HEADLINE_INDENT - len(f"{verdict}: {family} ") - len(why)
        what = family
        if parts:
            what += " " + textwrap.shorten(", ".join(parts), max(room_for_parts, 12), placeholder=" ...")
        lines.append(textwrap.shorten(f"{verdict}: {what}{why}", width - HEADLINE_INDENT, placeholder=" ..."))
    if len(lines) > room:
        lines = [*lines[:room - 1], f"... and {len(lines) - room + 1} more: see the table"]
    return lines


def _measured_size(nbytes: int | None) -> str:
    return "not measured" if nbytes is None else size_text(nbytes)


def _ceiling_size(m: Measured | None, search: str, nbytes: int | None) -> str:
    """A searched ceiling; one that reached the search's cap is only known to be at least that."""
    found = m.searches.get(search) if m is not None else None
    if found is not None and found.at_cap and nbytes is not None:
        return f"at the {size_text(nbytes)} search cap, not measured"
    return _measured_size(nbytes)


def headline(dev: DeviceReport, strict: bool = False, width: int = WIDTH) -> list[tuple[str, str]]:
    """The answer for one device, at most ``HEADLINE_LINES`` (label, text) pairs."""
    m = dev.measured
    counts = Counter(v.verdict for v in dev.verdicts)
    verdict = device_verdict(dev)
    tally = ", ".join(f"{counts[k]} {k}" for k in VERDICT_ORDER if counts[k])
    effect = {"match": "exit 0", "differs": "exit 1 (--strict)" if strict else "exit 0; --strict fails it",
              "MISMATCH": "exit 1", "ERROR": "exit 4"}[verdict]
    lines = [
        ("default ceiling", f"{_ceiling_size(m, 'default_dynamic_ceiling', m.default_dynamic_ceiling_bytes if m else None)}"
                            " without opt-in"),
        ("opt-in ceiling", _ceiling_size(m, split_search_name(REFERENCE_STATIC_BYTES, REFERENCE_THREADS),
                                         m.optin_dynamic_ceiling_bytes if m else None)),
        ("per-SM capacity", _measured_size(m.smem_per_sm_bytes if m else None)),
        ("reserved per block", _measured_size(m.reserved_bytes if m else None)),
        ("granularity", _measured_size(m.allocation_granularity_bytes if m else None)),
        ("static data", _static_cost(dev)),
        ("largest cluster", _largest_cluster(dev)),
        ("verdict", f"{verdict}: {tally or 'no verdicts'} ({effect})"),
    ]
    lines += [("", reason) for reason in _reasons(dev, HEADLINE_LINES - len(lines), width)]
    return lines


def device_summary(dev: DeviceReport) -> str:
    """The closing line of a device: verdict counts, probes and seconds."""
    counts = Counter(v.verdict for v in dev.verdicts)
    probes = sum(dev.measured.probes.values()) if dev.measured else 0
    verdicts = ", ".join(f"{counts[k]} {k}" for k in VERDICT_ORDER if counts[k])
    elapsed = f", {dev.elapsed_s:.2f} s" if dev.elapsed_s is not None else ""
    return f"{verdicts or 'no verdicts'}; {probes} probes{elapsed}"


def closing_lines(report: Report, strict: bool = False) -> list[str]:
    """After several devices: one line each, then the overall verdict (the worst of them)."""
    lines = [f"device {d.index}: {device_verdict(d)} ({printable(d.name or 'unknown device')})" for d in report.devices]
    rank = {"match": 0, "differs": 1, "ERROR": 2, "MISMATCH": 3}
    worst = max((device_verdict(d) for d in report.devices), key=rank.__getitem__, default="match")
    suffix = " (--strict: fails)" if strict and worst == "differs" else ""
    return [*lines, f"overall: {worst}{suffix}"]
