"""Text that fits the width it is given: tables whose widest columns wrap within their cells, and lines
that wrap at spaces with their indentation kept (a word longer than the width is broken)."""

from __future__ import annotations

import textwrap

DEFAULT_WIDTH = 100  # where no terminal says its width (output to a file or a pipe)
NARROWEST = 60  # no text is laid out narrower: a table of eight columns fits no fewer
NARROWEST_COLUMN = 6  # a column's words are broken only down to this width
GAP = "  "  # between two columns
CONTINUED = "  "  # what a wrapped line's later rows are indented by, beyond the line's own indentation


def _longest_word(cells: list[str]) -> int:
    return max((len(w) for cell in cells for w in cell.split()), default=0)


def column_widths(rows: list[tuple[str, ...]], headers: tuple[str, ...], width: int) -> list[int]:
    """Each column's width, in all at most ``width`` with the gaps where it can be: the widest column gives
    way first, down to its longest word; where that is not enough, words are broken, down to NARROWEST_COLUMN."""
    columns = [[h, *(r[i] for r in rows)] for i, h in enumerate(headers)]
    widths = [max(len(c) for c in cells) for cells in columns]
    room = width - len(GAP) * (len(headers) - 1)
    for floors in ([min(_longest_word(cells), n) for cells, n in zip(columns, widths, strict=True)],
                   [min(NARROWEST_COLUMN, n) for n in widths]):
        while sum(widths) > room:
            give = [i for i, w in enumerate(widths) if w > floors[i]]
            if not give:
                break
            widths[max(give, key=lambda i: widths[i])] -= 1
    return widths


def _cell(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def table(rows: list[tuple[str, ...]], headers: tuple[str, ...], width: int) -> str:
    """``rows`` under ``headers``, the header underlined, in at most ``width`` columns where the columns'
    longest words allow it (else NARROWEST_COLUMN each): a cell wider than its column wraps within it."""
    widths = column_widths(rows, headers, width)
    rule = tuple("-" * w for w in widths)
    lines = []
    for row in (headers, rule, *rows):
        cells = [_cell(text, w) if row is not rule else [text] for text, w in zip(row, widths, strict=True)]
        for depth in range(max(len(c) for c in cells)):
            parts = [(c[depth] if depth < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)]
            lines.append(GAP.join(parts).rstrip())
    return "\n".join(lines)


def wrapped(text: str, width: int) -> str:
    """``text`` with every line wider than ``width`` wrapped at spaces, its later rows indented two more
    than the line itself (a word wider than the width is broken)."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip(" "))]
        out += textwrap.wrap(line, width, subsequent_indent=indent + CONTINUED, break_on_hyphens=False)
    return "\n".join(out)
