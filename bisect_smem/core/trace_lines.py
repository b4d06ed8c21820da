"""The lines of a collector's file, one at a time, and the checks of the values in them: a line longer than
MAX_LINE_BYTES is read past without being kept, a line that is not JSON or holds a number no collector writes
is a BadLine of its kind, which the reader counts and goes on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from bisect_smem.core.trace_events import MAX_BYTES, MAX_INT32, MAX_LINE_BYTES, Skip, Unwritable


class BadLine(Exception):
    """A line the reader refuses: its kind."""

    def __init__(self, kind: Skip) -> None:
        super().__init__(kind.value)
        self.kind = kind


def numbered_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None, bool]]:
    """(number, line, complete) of each line; a line longer than MAX_LINE_BYTES comes as None, read past
    without being kept; the last line without a newline comes with complete False."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if line.endswith(b"\n"):
            yield number, line, True
        elif len(line) <= MAX_LINE_BYTES:
            yield number, line, False
        else:
            while line and not line.endswith(b"\n"):
                line = stream.readline(MAX_LINE_BYTES)
            yield number, None, True


def parse(line: bytes | None) -> tuple[dict[str, Any], bool]:
    """The event of ``line``, and whether bytes that are not UTF-8 were replaced to read it. orjson parses
    where it is installed (four times faster); the standard parser reads whatever orjson refuses (bytes that
    are not UTF-8, NaN), so that what is read is the same either way: an integer beyond 64 bits that orjson
    reads as a float is refused as a number no collector writes, as the standard parser's int is."""
    if line is None:
        raise BadLine(Skip.TOO_LONG)
    replaced = False
    try:
        value = fast_loads(line)
    except Exception:  # noqa: BLE001 - whatever orjson refuses, the standard parser decides
        try:
            value = json.loads(line)
        except UnicodeDecodeError:
            replaced = True
            try:
                value = json.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                raise BadLine(Skip.NOT_JSON) from None
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise BadLine(Skip.NOT_JSON) from None
    if type(value) is not dict or type(value.get("event")) is not str:
        raise BadLine(Skip.NOT_AN_EVENT)
    return value, replaced


try:
    from orjson import loads as fast_loads
except ImportError:  # pragma: no cover - the standard parser alone
    fast_loads = json.loads


def number(r: dict[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    """``r[key]``, an integer within [low, high); ``default`` where it is absent (or null) and one is given."""
    value = r.get(key)
    if value is None and default is not None:
        return default
    if type(value) is not int or not low <= value < high:
        raise BadLine(Skip.BAD_NUMBER)
    return value


def known(value: int) -> int | None:
    """A value the collector writes as -1 where it does not know it: None then."""
    return None if value < 0 else value


NO_DIMS = (0, 0, 0)


def dims(value: Any) -> tuple[int, int, int]:
    """Three non-negative 32-bit numbers (a grid, block or cluster); (0, 0, 0) where absent."""
    if value is None:
        return NO_DIMS
    if type(value) is not list or len(value) != 3:
        raise BadLine(Skip.NOT_AN_EVENT)
    x, y, z = value
    if type(x) is not int or type(y) is not int or type(z) is not int or not (
            0 <= x < MAX_BYTES and 0 <= y < MAX_BYTES and 0 <= z < MAX_BYTES):
        raise BadLine(Skip.BAD_NUMBER)
    return (x, y, z)


def text_of(r: dict[str, Any], key: str, default: str = "") -> str:
    """``r[key]`` where it is a string, else ``default``."""
    value = r.get(key)
    return value if isinstance(value, str) else default


def name_of(r: dict[str, Any]) -> str | None:
    """The kernel name of a record, None where it has none."""
    value = r.get("name")
    return value if isinstance(value, str) and value else None


def notices(stream: BinaryIO, file_name: str) -> Iterator[Unwritable | tuple[Skip, str]]:
    """Each notice of the tool's notices.jsonl, or the kind of a line that is none and where it is."""
    for line_number, line, complete in numbered_lines(stream):
        where = f"{file_name} line {line_number}"
        try:
            r, replaced = parse(line if complete else b"")
            if r["event"] != "unwritable":
                raise BadLine(Skip.UNKNOWN_EVENT)
            yield Unwritable(number(r, "pid", 0, MAX_INT32), number(r, "errno", 0, 1 << 16), text_of(r, "path"),
                             text_of(r, "command"))
            if replaced:
                yield Skip.NOT_UTF8, where
        except BadLine as bad:
            yield bad.kind, where
