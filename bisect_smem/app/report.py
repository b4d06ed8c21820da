"""What a person reads: per device a headline (the answer), then a compact table; Markdown for bug reports.

The compact table folds rows that agree across thread counts into one, and each family of
predictions (residency staircase, carveout sweep, clusters) into one summary row unless something in
it disagrees; ``verbose`` shows every row. Text output fits in ``WIDTH`` columns: long cells wrap.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Callable

from tabulate import tabulate

from bisect_smem.analysis.merge import SUMMARY, Group
from bisect_smem.core.hardware import KIB
from bisect_smem.core.model import DeviceReport, Report, Verdict
from bisect_smem.core.text import dash

TABLE_HEADERS = ("quantity", "reported", "source", "measured", "verdict", "note")
COMPACT_HEADERS = ("quantity", "reported", "measured", "verdict", "note")
WIDTH = 100
HEADLINE_LINES = 12
HEADLINE_INDENT = 21  # two spaces, then the labels' column
VERDICT_ORDER = ("match", "differs", "MISMATCH", "ERROR", "info")
# Families of rows that become one summary row when every row in them agrees.
FAMILIES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("available dynamic (API)", lambda q: q.startswith("available dynamic (API)")),
    ("residency staircase", lambda q: q.startswith("blocks/SM from ")),
    ("carveout sweep", lambda q: q.startswith("blocks/SM at carveout ")),
    ("thread block clusters", lambda q: q.startswith(("largest cluster", "co-resident clusters",
                                                      "distributed shared memory"))),
    ("published table", lambda q: q.startswith("published:")),
)
# Fragments of a note the compact table leaves out: probe counts, and the size of a difference from a
# prediction (the reported and measured columns show it).
_COMPACT_DROPS = (re.compile(r"^\d+ probes \(bound \d+\)$"), re.compile(r"^\d+ more than the API$"))
_THREADS = re.compile(r"^(?P<what>.*), (?P<threads>\d+) threads$")


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
    return [first, second]


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


def _family(quantity: str) -> tuple[str, str]:
    """A row's family and what distinguishes it within the family (for the headline's reasons)."""
    for prefix in ("blocks/SM at carveout ", "co-resident clusters of ", "blocks/SM from "):
        if quantity.startswith(prefix):
            return prefix.strip(), quantity.removeprefix(prefix)
    return quantity, ""


def _reasons(dev: DeviceReport, room: int) -> list[str]:
    """One line per family of rows that are not ``match``/``info``: the why of the verdict."""
    grouped: dict[tuple[str, str], list[Verdict]] = {}
    for v in dev.verdicts:
        if v.verdict in ("differs", "MISMATCH", "ERROR"):
            grouped.setdefault((v.verdict, _family(v.quantity)[0]), []).append(v)
    if dev.error and not any(v.verdict == "ERROR" for v in dev.verdicts):
        grouped[("ERROR", dev.error)] = []
    lines: list[str] = []
    for (verdict, family), rows in grouped.items():
        parts = [_family(v.quantity)[1] for v in rows if _family(v.quantity)[1]]
        why = f": {rows[0].note.split('; ')[0]}" if rows and rows[0].note else ""
        room_for_parts = WIDTH - HEADLINE_INDENT - len(f"{verdict}: {family} ") - len(why)
        what = family
        if parts:
            what += " " + textwrap.shorten(", ".join(parts), max(room_for_parts, 12), placeholder=" ...")
        lines.append(textwrap.shorten(f"{verdict}: {what}{why}", WIDTH - HEADLINE_INDENT, placeholder=" ..."))
    if len(lines) > room:
        lines = [*lines[:room - 1], f"... and {len(lines) - room + 1} more: see the table"]
    return lines


def _measured_size(nbytes: int | None) -> str:
    return "not measured" if nbytes is None else size_text(nbytes)


def headline(dev: DeviceReport, strict: bool = False) -> list[tuple[str, str]]:
    """The answer for one device, at most ``HEADLINE_LINES`` (label, text) pairs."""
    m = dev.measured
    counts = Counter(v.verdict for v in dev.verdicts)
    verdict = device_verdict(dev)
    tally = ", ".join(f"{counts[k]} {k}" for k in VERDICT_ORDER if counts[k])
    effect = {"match": "exit 0", "differs": "exit 1 (--strict)" if strict else "exit 0; --strict fails it",
              "MISMATCH": "exit 1", "ERROR": "exit 4"}[verdict]
    lines = [
        ("default ceiling", f"{_measured_size(m.default_dynamic_ceiling_bytes if m else None)} without opt-in"),
        ("opt-in ceiling", _measured_size(m.optin_dynamic_ceiling_bytes if m else None)),
        ("per-SM capacity", _measured_size(m.smem_per_sm_bytes if m else None)),
        ("reserved per block", _measured_size(m.reserved_bytes if m else None)),
        ("granularity", _measured_size(m.allocation_granularity_bytes if m else None)),
        ("static data", _static_cost(dev)),
        ("largest cluster", _largest_cluster(dev)),
        ("verdict", f"{verdict}: {tally or 'no verdicts'} ({effect})"),
    ]
    lines += [("", reason) for reason in _reasons(dev, HEADLINE_LINES - len(lines))]
    return lines


def _compact_note(note: str) -> str:
    kept = [part for part in note.split("; ") if not any(drop.match(part) for drop in _COMPACT_DROPS)]
    return "; ".join(part.removeprefix("carveout ") if part.startswith("carveout [") else part for part in kept)


def _compact(v: Verdict) -> Verdict:
    """A row as the compact table shows it: shorter label, no probe counts, long lists cut to the news."""
    reported, measured = v.reported, v.measured
    if isinstance(reported, str) and isinstance(measured, str) and ", " in reported and ", " in measured:
        published = reported.split(", ")
        extra = [item for item in measured.split(", ") if item not in published]
        reported, measured = f"{len(published)} sizes", ", ".join(extra) if extra else "all published"
    return Verdict(v.quantity.replace("opt-in dynamic ceiling", "opt-in ceiling"), reported, v.source, measured,
                   v.verdict, _compact_note(v.note), v.kind)


def _fold_threads(rows: list[Verdict]) -> list[Verdict]:
    """Rows that differ only in their thread count, and agree, become one row; the counts go to the note."""
    out: list[Verdict] = []
    threads: dict[int, list[str]] = {}
    keys: dict[tuple, int] = {}
    for v in map(_compact, rows):
        found = _THREADS.match(v.quantity)
        if found is None:
            out.append(v)
            continue
        key = (found["what"], v.reported, v.source, v.measured, v.verdict, v.note)
        if key not in keys:
            keys[key] = len(out)
            out.append(Verdict(found["what"], v.reported, v.source, v.measured, v.verdict, v.note, v.kind))
        threads.setdefault(keys[key], []).append(found["threads"])
    for at, counts in threads.items():
        v = out[at]
        if len(counts) == 1:  # nothing folded: the row keeps its own name
            out[at] = Verdict(f"{v.quantity}, {counts[0]} threads", v.reported, v.source, v.measured, v.verdict,
                              v.note, v.kind)
            continue
        note = "; ".join(part for part in (f"{'/'.join(counts)} threads", v.note) if part)
        out[at] = Verdict(v.quantity, v.reported, v.source, v.measured, v.verdict, note, v.kind)
    return out


def _summary(name: str, rows: list[Verdict]) -> Verdict:
    verdicts = {v.verdict for v in rows}
    sources = sorted({v.source for v in rows if v.source})
    return Verdict(f"{name} ({len(rows)} rows)", None, sources[0] if len(sources) == 1 else None, None,
                   "match" if "match" in verdicts else "info",
                   "all agree" if verdicts == {"match"} else "agree or nothing to compare", rows[0].kind)


def compact_rows(dev: DeviceReport) -> list[Verdict]:
    """The rows of the compact table: thread counts folded, agreeing families summarised in place."""
    rows = _fold_threads(list(dev.verdicts))
    out: list[Verdict] = []
    placed: set[str] = set()
    for v in rows:
        family = next((name for name, member in FAMILIES if member(v.quantity)), None)
        if family is None:
            out.append(v)
            continue
        if family in placed:
            continue
        placed.add(family)
        members = [r for r in rows if next((n for n, m in FAMILIES if m(r.quantity)), None) == family]
        agreeing = [r for r in members if r.verdict in ("match", "info")]
        out += [r for r in members if r.verdict not in ("match", "info")]
        if agreeing:
            out.append(_summary(family if len(agreeing) == len(members) else f"{family}, the rest", agreeing))
    return out


def _table_rows(rows: list[Verdict], headers: tuple[str, ...] = TABLE_HEADERS) -> list[tuple[str, ...]]:
    cells = {"quantity": lambda v: v.quantity, "reported": lambda v: dash(v.reported),
             "source": lambda v: dash(v.source), "measured": lambda v: dash(v.measured),
             "verdict": lambda v: v.verdict, "note": lambda v: v.note}
    return [tuple(cells[h](v) for h in headers) for v in rows]


def device_table(rows: list[Verdict], width: int | None = WIDTH) -> str:
    """The rows as a plain-text table. With ``width`` (the compact table) the source column is left out
    (``--verbose`` and the JSON have it) and long cells wrap so that the table fits."""
    if width is None:
        return tabulate(_table_rows(rows), headers=TABLE_HEADERS, tablefmt="simple", disable_numparse=True)
    headers = COMPACT_HEADERS
    data = _table_rows(rows, headers)
    if not data:
        return tabulate(data, headers=headers, tablefmt="simple")
    caps = [36, 8, 12, 8]
    natural = [max(len(headers[i]), *(len(r[i]) for r in data)) for i in range(len(caps))]
    used = [min(n, c) for n, c in zip(natural, caps, strict=True)]
    note_width = max(width - sum(used) - 2 * len(caps), 12)
    while True:  # tabulate pads headers, so the width is checked on the result
        text = tabulate(data, headers=headers, tablefmt="simple", disable_numparse=True,
                        maxcolwidths=[*used, note_width])
        excess = max(len(line) for line in text.splitlines()) - width
        if excess <= 0 or note_width <= 12:
            return text
        note_width = max(note_width - excess, 12)


def device_summary(dev: DeviceReport) -> str:
    """The closing line of a device: verdict counts, probes and seconds."""
    counts = Counter(v.verdict for v in dev.verdicts)
    probes = sum(dev.measured.probes.values()) if dev.measured else 0
    verdicts = ", ".join(f"{counts[k]} {k}" for k in VERDICT_ORDER if counts[k])
    elapsed = f", {dev.elapsed_s:.2f} s" if dev.elapsed_s is not None else ""
    return f"{verdicts or 'no verdicts'}; {probes} probes{elapsed}"


def _headline_text(dev: DeviceReport, strict: bool) -> list[str]:
    return [f"  {label:<{HEADLINE_INDENT - 2}}{text}" for label, text in headline(dev, strict)]


def closing_lines(report: Report, strict: bool = False) -> list[str]:
    """After several devices: one line each, then the overall verdict (the worst of them)."""
    lines = [f"device {d.index}: {device_verdict(d)} ({d.name or 'unknown device'})" for d in report.devices]
    rank = {"match": 0, "differs": 1, "ERROR": 2, "MISMATCH": 3}
    worst = max((device_verdict(d) for d in report.devices), key=rank.__getitem__, default="match")
    suffix = " (--strict: fails)" if strict and worst == "differs" else ""
    return [*lines, f"overall: {worst}{suffix}"]


def render(report: Report, verbose: bool = False, strict: bool = False) -> str:
    """The whole report as text: the host, then per device its header, headline, table and any error."""
    from bisect_smem.devices.host import describe

    blocks = [f"host {report.host}: {describe(report.host_context)}"] if report.host_context else []
    for dev in report.devices:
        lines = header_lines(dev)
        if dev.verdicts:
            lines += _headline_text(dev, strict)
            rows = list(dev.verdicts) if verbose else compact_rows(dev)
            lines.append(device_table(rows, None if verbose else WIDTH))
            lines.append(device_summary(dev))
        if dev.error:
            lines.append(f"error: {dev.error}")
        for event in dev.events:
            lines.append(f"event: {event.get('what')} ({event.get('where')})")
        blocks.append("\n".join(lines))
    if len(report.devices) > 1:
        blocks.append("\n".join(closing_lines(report, strict)))
    return "\n\n".join(blocks)


def _md(text: str) -> str:
    """A Markdown table cell: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, verbose: bool = False, strict: bool = False) -> str:
    """The report as GitHub-flavoured Markdown, for a bug report or a forum thread."""
    from bisect_smem.devices.host import describe

    out = [f"# bisect-smem {report.tool_version}", "",
           f"Host `{report.host}`" + (f": {describe(report.host_context)}" if report.host_context else "")
           + f"; backend {report.backend}; {report.created_utc}."]
    for dev in report.devices:
        first, second = header_lines(dev)
        out += ["", f"## {first}", "", second, ""]
        if dev.verdicts:
            out += [f"- **{label}**: {_md(text)}" if label else f"  - {_md(text)}"
                    for label, text in headline(dev, strict)]
            rows = list(dev.verdicts) if verbose else compact_rows(dev)
            out += ["", tabulate([tuple(_md(c) for c in row) for row in _table_rows(rows)], headers=TABLE_HEADERS,
                                 tablefmt="github", disable_numparse=True), "", device_summary(dev)]
        if dev.error:
            out += ["", f"error: {_md(dev.error)}"]
        out += [f"- event: {_md(str(e.get('what')))} ({_md(str(e.get('where')))})" for e in dev.events]
    if len(report.devices) > 1:
        out += ["", *(f"- {line}" for line in closing_lines(report, strict))]
    return "\n".join(out)


def merge_table(groups: list[Group]) -> str:
    """The merged fleet: one row per GPU model and driver, with the devices that deviate (``tie`` where
    the most common values are equally common)."""
    rows = []
    for g in groups:
        deviating = "; ".join(f"{label} ({len(d)} differ: {d[0]})" for label, d in g.deviations.items()) or "none"
        summary = ("tie" if name in g.ties else dash(g.majority.get(name)) for name in SUMMARY)
        rows.append((g.model, g.driver, len(g.members), *summary, deviating))
    return tabulate(rows, headers=("GPU model", "driver", "devices", "default B", "opt-in B", "smem/SM B",
                                   "deviating from the majority"), disable_numparse=True)
