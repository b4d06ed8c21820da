"""argparse types shared by the command line and ``fit``: each says what it received when it refuses."""

from __future__ import annotations

import argparse


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (decimal, or 0x.. hexadecimal)."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {value})")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


def parse_stages(text: str) -> int | str:
    """``--stages``: a whole number >= 1, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as exc:
        if "whole number" in str(exc):
            raise argparse.ArgumentTypeError(f"expected a whole number or 'auto' (got {text!r})") from None
        raise


def positive_float(text: str) -> float:
    """A number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds (got {text!r})") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return value
