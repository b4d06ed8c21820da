"""The text a person reads in a terminal: the report (per device a header, the headline, a table that fits
in WIDTH columns, and a summary line), and the profiles."""

from __future__ import annotations

from tabulate import tabulate

from bisect_smem.app.render.host import describe
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
from bisect_smem.core.text import dash, printable

TABLE_HEADERS = ("quantity", "reported", "source", "measured", "verdict", "note")
COMPACT_HEADERS = ("quantity", "reported", "measured", "verdict", "note")


def render(report: Report, options: RenderOptions = DEFAULT_OPTIONS) -> str:
    """The whole report as text: the host, then per device its header, headline, table and any error."""
    blocks = [printable(f"host {report.host}: {describe(report.host_context)}")] if report.host_context else []
    for section in sections(report, options):
        lines = list(section.header)
        if section.summary is not None:
            lines += [f"  {label:<{HEADLINE_INDENT - 2}}{text}" for label, text in section.headline]
            lines.append(device_table(list(section.rows), WIDTH, options.verbose))
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


# The widest each column but the note may be before it wraps: the note takes the rest of WIDTH.
_CAPS = {"quantity": 36, "reported": 8, "source": 16, "measured": 12, "verdict": 8}
_VERBOSE_CAPS = {**_CAPS, "quantity": 30, "measured": 8}


def device_table(rows: list[Shown], width: int = WIDTH, verbose: bool = False) -> str:
    """The rows as a plain-text table that fits in ``width`` columns, long cells wrapping in their column.
    The compact table leaves the source column out; ``verbose`` shows it (the JSON has it too)."""
    headers = TABLE_HEADERS if verbose else COMPACT_HEADERS
    data = table_cells(rows, headers)
    if not data:
        return tabulate(data, headers=headers, tablefmt="simple")
    caps = [(_VERBOSE_CAPS if verbose else _CAPS)[h] for h in headers[:-1]]
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


def profiles(rows: tuple[ArchProfile, ...]) -> str:
    """The published table, one row per profile."""
    cells = [(p.key, p.cc_string, ", ".join(p.aliases), p.example_parts, p.smem_per_sm_bytes,
              p.max_smem_per_block_optin_bytes, dash(p.reserved_smem_per_block_bytes),
              ", ".join(map(str, p.carveout_kib)) if p.carveout_kib else "-", "yes" if p.confirmed else "no")
             for p in rows]
    return tabulate(cells, headers=("profile", "cc", "aliases", "parts", "smem/SM B", "opt-in/block B",
                                    "reserved B", "carveouts KiB", "confirmed"), disable_numparse=True) + "\n"
