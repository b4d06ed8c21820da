"""How values read in tables and messages, the same in every report the tool writes."""

from __future__ import annotations


def dash(value: object) -> str:
    """``-`` for an unknown (None) value, else the value as text."""
    return "-" if value is None else str(value)
