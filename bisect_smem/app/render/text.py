"""The text a person reads in a terminal: the report (per device a header, the headline, a table that fits
in WIDTH columns, and a summary line), the comparison with baselines, the merged fleet and the profiles."""

from __future__ import annotations

from tabulate import tabulate

from bisect_smem.analysis.baseline import Comparison
from bisect_smem.analysis.merge import SUMMARY, Group
from bisect_smem.app.render.rows import (
    DEFAULT_OPTIONS,
    HEADLINE_INDENT,
    WIDTH,
    RenderOptions,
    Shown,
    closing_lines,
    sections,
)
from bisect_smem.core.model import Report
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.core.quantities import Regression
from bisect_smem.core.text import dash
from bisect_smem.devices.host import describe

TABLE_HEADERS = ("quantity", "reported", "source", "measured", "verdict", "note")
COMPACT_HEADERS = ("quantity", "reported", "measured", "verdict", "note")


def render(report: Report, options: RenderOptions = DEFAULT_OPTIONS) -> str:
    """The whole report as text: the host, then per device its header, headline, table and any error."""
    blocks = [f"host {report.host}: {describe(report.host_context)}"] if report.host_context else []
    for section in sections(report, options):
        lines = list(section.header)
        if section.summary is not None:
            lines += [f"  {label:<{HEADLINE_INDENT - 2}}{text}" for label, text in section.headline]
            lines.append(device_table(list(section.rows), None if options.verbose else WIDTH))
            lines.append(section.summary)
        if section.error:
            lines.append(f"error: {section.error}")
        lines += [f"event: {what} ({where})" for what, where in section.events]
        blocks.append("\n".join(lines))
    if len(report.devices) > 1:
        blocks.append("\n".join(closing_lines(report, options.strict)))
    return "\n\n".join(blocks) + "\n"


def table_cells(rows: list[Shown], headers: tuple[str, ...] = TABLE_HEADERS) -> list[tuple[str, ...]]:
    """The cells of ``headers`` for each row, unknown values as ``-``."""
    cells = {"quantity": lambda v: v.quantity, "reported": lambda v: dash(v.reported),
             "source": lambda v: dash(v.source), "measured": lambda v: dash(v.measured),
             "verdict": lambda v: v.verdict, "note": lambda v: v.note}
    return [tuple(cells[h](v) for h in headers) for v in rows]


def device_table(rows: list[Shown], width: int | None = WIDTH) -> str:
    """The rows as a plain-text table. With ``width`` (the compact table) the source column is left out
    (``--verbose`` and the JSON have it) and long cells wrap so that the table fits."""
    if width is None:
        return tabulate(table_cells(rows), headers=TABLE_HEADERS, tablefmt="simple", disable_numparse=True)
    headers = COMPACT_HEADERS
    data = table_cells(rows, headers)
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


def regression_detail(r: Regression) -> str:
    """``baseline X, now Y``, or which side lacks the quantity."""
    if not r.in_baseline:
        return f"not in the baseline, now {r.now!r}"
    if not r.measured_now:
        return f"baseline {r.baseline!r}, not measured now"
    return f"baseline {r.baseline!r}, now {r.now!r}"


def regression_line(r: Regression) -> str:
    """``QUANTITY: baseline X, now Y``."""
    return f"{r.name}: {regression_detail(r)}"


def comparison(index: int, result: Comparison) -> str:
    """One device against its baseline: which one, how many quantities, and a table of what regressed."""
    if result.baseline is None:
        return f"device {index}: {result.note}\n"
    text = f"device {index}: {result.note}: {result.compared} quantities, {len(result.regressions)} regressed\n"
    if result.regressions:
        rows = [(index, r.name, regression_detail(r)) for r in result.regressions]
        text += tabulate(rows, headers=("device", "quantity", "baseline -> now"), disable_numparse=True) + "\n"
    return text


def deviations(group: Group) -> dict[str, list[str]]:
    """Per deviating device (by label), its error and each quantity that differs from the majority."""
    errors = {m.label: m.error for m in group.members if m.error}
    return {label: [*([f"error: {errors[label]}"] if label in errors else []),
                    *(f"{d.name}: {d.value!r} (majority: {d.majority!r})" for d in found)]
            for label, found in group.deviations.items()}


def merge(groups: list[Group]) -> str:
    """The merged fleet: one row per GPU model and driver with the devices that deviate (``tie`` where the
    most common values are equally common), then every deviation and tie on its own line."""
    rows, lines = [], []
    for g in groups:
        per_device = deviations(g)
        deviating = "; ".join(f"{label} ({len(d)} differ: {d[0]})" for label, d in per_device.items()) or "none"
        summary = ("tie" if name in g.ties else dash(g.majority.get(name)) for name in SUMMARY)
        rows.append((g.model, g.driver, len(g.members), *summary, deviating))
        lines += [f"{label}: {line}" for label, found in per_device.items() for line in found]
        lines += [f"{g.model} (driver {g.driver}): {name}: a tie between {', '.join(map(repr, values))}; "
                  f"no majority, nobody blamed" for name, values in g.ties.items()]
    table = tabulate(rows, headers=("GPU model", "driver", "devices", "default B", "opt-in B", "smem/SM B",
                                    "deviating from the majority"), disable_numparse=True)
    return "\n".join([table, *lines]) + "\n"


def profiles(rows: tuple[ArchProfile, ...]) -> str:
    """The published table, one row per profile."""
    cells = [(p.key, p.cc_string, ", ".join(p.aliases), p.example_parts, p.smem_per_sm_bytes,
              p.max_smem_per_block_optin_bytes, dash(p.reserved_smem_per_block_bytes),
              ", ".join(map(str, p.carveout_kib)) if p.carveout_kib else "-", "yes" if p.confirmed else "no")
             for p in rows]
    return tabulate(cells, headers=("profile", "cc", "aliases", "parts", "smem/SM B", "opt-in/block B",
                                    "reserved B", "carveouts KiB", "confirmed"), disable_numparse=True) + "\n"
