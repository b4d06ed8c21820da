"""argparse types shared by the command line and ``fit``: each says what it received, and which bound,
when it refuses, and reads ASCII decimal digits only, so ``²``, ``٣``, ``0x10`` and 5,000 digits are
refused rather than read (core/numbers.py)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from bisect_smem.core.numbers import MAX_DIGITS
from bisect_smem.core.sizes import shown

MAX_SECONDS = 7 * 24 * 3600.0  # a timeout longer than a week is no timeout
WEEK = f"{MAX_SECONDS:g} s, a week"  # how --help states the bound of every option that takes seconds
_SIGNED = re.compile(r"-?[0-9]+")
_SECONDS = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _integer(text: str) -> int:
    """A whole number in ASCII digits, a minus sign allowed (so that -1 is told the bound)."""
    value = text.strip()
    if not _SIGNED.fullmatch(value) or len(value.lstrip("-").lstrip("0")) > MAX_DIGITS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise argparse.ArgumentTypeError(f"expected a whole number (got {shown!r})")
    return int(value)


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {value})")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


def int_in(low: int, high: int) -> Callable[[str], int]:
    """The argparse type of a whole number in ``low..high``; a refusal names both bounds."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low}..{high} (got {value})")
        return value

    parse.__name__ = f"whole number in {low}..{high}"
    return parse


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
    """A number of seconds > 0 and at most a week, in plain decimal digits (no ``inf``, ``nan`` or exponent)."""
    value = text.strip()
    if not _SECONDS.fullmatch(value) or len(value) > 2 * MAX_DIGITS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise argparse.ArgumentTypeError(f"expected a number of seconds (got {shown!r})")
    seconds = float(value)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    if seconds > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {WEEK} (got {text})")
    return seconds


class Once(argparse.Action):
    """An option that names one file or folder: given twice, it is refused, since argparse would keep the
    last and silently drop the file asked for first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        """Keep ``values``, or refuse (exit 2) when the option was given before."""
        given = getattr(namespace, "_given_once", set())
        if self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} was given twice ({shown(str(getattr(namespace, self.dest)))} "
                         f"and {shown(str(values))}); it names one path: give it once")
        namespace._given_once = given | {self.dest}
        setattr(namespace, self.dest, values)
