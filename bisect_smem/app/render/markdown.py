"""The report as GitHub-flavoured Markdown, for a bug report or a forum thread: the same headline and
rows as the text, as a list and a table."""

from __future__ import annotations

from tabulate import tabulate

from bisect_smem.app.render.rows import (
    DEFAULT_OPTIONS,
    RenderOptions,
    closing_lines,
    device_summary,
    header_lines,
    headline,
    shown_rows,
)
from bisect_smem.app.render.text import TABLE_HEADERS, table_cells
from bisect_smem.core.model import Report
from bisect_smem.devices.host import describe


def _md(text: str) -> str:
    """A Markdown table cell: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(report: Report, options: RenderOptions = DEFAULT_OPTIONS) -> str:
    """The whole report as Markdown: a title, then per device its header, headline, table and any error."""
    out = [f"# bisect-smem {report.tool_version}", "",
           f"Host `{report.host}`" + (f": {describe(report.host_context)}" if report.host_context else "")
           + f"; backend {report.backend}; {report.created_utc}."]
    for dev in report.devices:
        first, second = header_lines(dev)
        out += ["", f"## {first}", "", second, ""]
        if dev.verdicts:
            out += [f"- **{label}**: {_md(text)}" if label else f"  - {_md(text)}"
                    for label, text in headline(dev, options.strict)]
            cells = table_cells(shown_rows(dev, options.verbose))
            out += ["", tabulate([tuple(_md(c) for c in row) for row in cells], headers=TABLE_HEADERS,
                                 tablefmt="github", disable_numparse=True), "", device_summary(dev)]
        if dev.error:
            out += ["", f"error: {_md(dev.error)}"]
        out += [f"- event: {_md(str(e.get('what')))} ({_md(str(e.get('where')))})" for e in dev.events]
    if len(report.devices) > 1:
        out += ["", *(f"- {line}" for line in closing_lines(report, options.strict))]
    return "\n".join(out) + "\n"
