"""How values read in tables and messages, the same in every report the tool writes."""

from __future__ import annotations


def dash(value: object) -> str:
    """``-`` for an unknown (None) value, else the value as text."""
    return "-" if value is None else str(value)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` with every character a terminal would act on written as an escape (``\\x1b``, ``\\x00``,
    ``\\n``, a right-to-left override ``\\u202e``): a name read from a device or a file changes nothing on
    the screen but its own characters, and stays on its line."""
    value = str(text)
    return value if value.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in value)


def printable_lines(text: str) -> str:
    """``printable`` for each line of a text that is printed whole: its own line breaks are kept."""
    return "\n".join(printable(line) for line in text.split("\n"))
