"""The report as GitHub-flavoured Markdown, for a bug report or a forum thread: the same headline and
rows as the text, as a list and a table."""

from __future__ import annotations

from tabulate import tabulate

from bisect_smem.app.render.host import describe
from bisect_smem.app.render.rows import DEFAULT_OPTIONS, RenderOptions, closing_lines, sections
from bisect_smem.app.render.text import TABLE_HEADERS, table_cells
from bisect_smem.core.model import Report
from bisect_smem.core.text import printable

# What Markdown (and the HTML it lets through) would act on in a name read from a device or a file: a
# backslash escape shows each as itself. GitHub also links a bare URL, which an escaped ':' or '.' stops.
_ACTIVE = str.maketrans({char: "\\" + char for char in "\\`*_[]<>&~!#"})


def inert(text: str) -> str:
    """``text`` shown as itself in Markdown: no HTML, link, image, emphasis or code span, one line."""
    # printable first: its escapes (\x1b) get their backslash escaped too, so that every text shows the same.
    shown = printable(text).translate(_ACTIVE).replace("://", "\\://")
    at = shown.lower().rfind("www.")
    while at >= 0:  # www.example is a link too
        shown = shown[:at + 3] + "\\" + shown[at + 3:]
        at = shown.lower().rfind("www.", 0, at)
    return shown


def _md(text: str) -> str:
    """A Markdown table cell: as ``inert``, and its pipes escaped."""
    return inert(text).replace("|", "\\|")


def render(report: Report, options: RenderOptions = DEFAULT_OPTIONS) -> str:
    """The whole report as Markdown: a title, then per device its header, headline, table and any error."""
    out = [f"# bisect-smem {_md(report.tool_version)}", "",
           f"Host {_md(report.host)}" + (f": {_md(describe(report.host_context))}" if report.host_context else "")
           + f"; backend {_md(report.backend)}; {_md(report.created_utc)}."]
    for section in sections(report, options):
        first, second = section.header
        out += ["", f"## {inert(first)}", "", inert(second), ""]
        if section.summary is not None:
            out += [f"- **{label}**: {_md(text)}" if label else f"  - {_md(text)}" for label, text in section.headline]
            cells = table_cells(list(section.rows))
            out += ["", tabulate([tuple(_md(c) for c in row) for row in cells], headers=TABLE_HEADERS,
                                 tablefmt="github", disable_numparse=True), "", inert(section.summary)]
        if section.error:
            out += ["", f"error: {_md(section.error)}"]
        out += [f"- event: {_md(what)} ({_md(where)})" for what, where in section.events]
    if len(report.devices) > 1:
        out += ["", *(f"- {inert(line)}" for line in closing_lines(report, options.strict))]
    return "\n".join(out) + "\n"
