"""The text a person reads in a terminal: the report (per device a header, the headline, a table that fits
in the options' width, and a summary line)."""

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
from bisect_smem.app.render.width import table, wrapped
from bisect_smem.core.model import Report
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
            lines.append(device_table(list(section.rows), options.width, options.verbose))
            lines.append(section.summary)
        if section.error:
            lines.append(f"error: {section.error}")
        lines += [f"event: {what} ({where})" for what, where in section.events]
        blocks.append("\n".join(lines))
    if len(report.devices) > 1:
        blocks.append("\n".join(closing_lines(report, options.strict)))
    # A line the layout above did not bound (a host's or device's name, an error) wraps within the width.
    return wrapped("\n\n".join(blocks), options.width) + "\n"


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
        if excess <= 0:
            return text
        if note_width <= 12:
            # The columns' caps leave the note too little room: every column gives way, the widest first.
            return table(data, headers, width)
        note_width = max(note_width - excess, 12)

