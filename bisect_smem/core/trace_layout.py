"""The C collector's launch and count lines, as collector.c writes them, read without a JSON parser: they are
most of a trace. A line is taken apart by one pattern, and each distinct part of it (a configuration, an api
and domain, a handle and name) is checked and decoded once, then kept (at most PARTS_MAX of each, across the
files of a folder: the workers of a server launch the same kernels alike)."""

from __future__ import annotations

import re
from typing import Any

from bisect_smem.core.trace_events import MAX_BLOCK_THREADS, MAX_BYTES, MAX_INT32
from bisect_smem.core.trace_lines import known

PARTS_MAX = 1 << 16  # emptied when full, so that memory stays bounded
NO_ATTRIBUTES = (None, None, None)  # a kernel's attributes, where the record has none

# The launch and count lines of the C collector, as collector.c writes them:
# COLLECTOR_LAUNCH takes a line apart (its id; its api and domain; its correlation; its configuration; its
# handle and name), and each distinct part is checked once (COLLECTOR_CONFIGURATION, plain_text), so that a line
# is read as the JSON parser reads it or not this way at all: digits without a sign, leading zero or exponent;
# strings without an escape or a control character; no key twice. Ids of at most 14 digits and correlation ids
# of at most 9 are within their bounds (2^48, 2^32), and are kept as written. A line that does not match is
# parsed as JSON.
COLLECTOR_LAUNCH = re.compile(
    rb'\{"event":"launch","id":([1-9][0-9]{0,13}),"api":"([A-Za-z0-9_]{1,128}","domain":"(?:driver|runtime))",'
    rb'"correlation":(0|[1-9][0-9]{0,8}),("grid":[^"]*"block":[^"]*"cluster":[^"]*"dynamic_bytes":[^"]*'
    rb'"static_bytes":[^"]*"result":[^"]*(?:"max_dynamic_bytes":[^"]*"max_threads":[^"]*"registers":[^"]*)?'
    rb'"captured":(?:true|false)),"handle":"([^"]{0,128}(?:","name":".*)?)"\}\n').fullmatch
NAME_FIELD = b'","name":"'  # between a launch line's handle and its name
_DIMS = rb"\[(0|[1-9][0-9]{0,9}),(0|[1-9][0-9]{0,9}),(0|[1-9][0-9]{0,9})\]"
_SIGNED = rb"(-1|0|-?[1-9][0-9]{0,9})"
COLLECTOR_CONFIGURATION = re.compile(
    rb'"grid":' + _DIMS + rb',"block":' + _DIMS + rb',"cluster":' + _DIMS + rb',"dynamic_bytes":(0|[1-9][0-9]{0,9}),'
    rb'"static_bytes":' + _SIGNED + rb',"result":' + _SIGNED + rb'(?:,"max_dynamic_bytes":' + _SIGNED +
    rb',"max_threads":' + _SIGNED + rb',"registers":' + _SIGNED + rb')?,"captured":(true|false)').fullmatch
COLLECTOR_COUNT = re.compile(rb'\{"event":"count","id":([1-9][0-9]{0,13}),"count":([1-9][0-9]{0,14})\}\n').fullmatch
_NOT_PLAIN = bytes(range(0x20)) + b'"\\'  # what a JSON string holds only escaped


def plain_text(raw: bytes) -> str | None:
    """The text of a JSON string's inside that holds no escape nor control character, None for any other
    (or for bytes that are not UTF-8)."""
    if len(raw.translate(None, _NOT_PLAIN)) != len(raw):
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


class Parts:
    """The collector's configurations, calls and kernels as read from its lines' bytes, checked once each (at
    most PARTS_MAX of each: past it, they are read again)."""

    def __init__(self) -> None:
        self.configurations: dict[bytes, tuple[Any, ...] | None] = {}
        self.calls: dict[bytes, tuple[str, str, bool]] = {}
        self.kernels: dict[bytes, tuple[str, str | None] | None] = {}

    def configuration(self, raw: bytes) -> tuple[Any, ...] | None:
        """The grid, block, cluster, dynamic and static bytes, result, capture and the kernel's attributes of a
        launch line's configuration (COLLECTOR_LAUNCH's fifth group), bounds checked as trace_read checks
        them; None where one is out of bounds or written otherwise (the line is then read as any other)."""
        if raw in self.configurations:
            return self.configurations[raw]
        if len(self.configurations) >= PARTS_MAX:
            self.configurations.clear()
        found = self.configurations[raw] = _configuration(raw)
        return found

    def call(self, raw: bytes) -> tuple[str, str, bool]:
        """A launch line's api and domain (COLLECTOR_LAUNCH's second group): the api, the domain, whether it
        is the runtime's."""
        found = self.calls.get(raw)
        if found is None:
            if len(self.calls) >= PARTS_MAX:
                self.calls.clear()
            api, _, domain = raw.partition(b'","domain":"')
            found = self.calls[raw] = (api.decode(), domain.decode(), domain == b"runtime")
        return found

    def kernel(self, raw: bytes) -> tuple[str, str | None] | None:
        """A launch line's handle and kernel name (COLLECTOR_LAUNCH's fifth group), None for an empty name;
        None where either is not plain text (plain_text)."""
        if raw in self.kernels:
            return self.kernels[raw]
        if len(self.kernels) >= PARTS_MAX:
            self.kernels.clear()
        handle, named, name = raw.partition(NAME_FIELD)
        handle, name = plain_text(handle), plain_text(name) if named else None
        found = self.kernels[raw] = None if handle is None or (named and name is None) else (handle, name or None)
        return found


def _configuration(raw: bytes) -> tuple[Any, ...] | None:
    m = COLLECTOR_CONFIGURATION(raw)
    if m is None:
        return None
    (gx, gy, gz, bx, by, bz, cx, cy, cz, dynamic, static, result) = map(int, m.group(*range(1, 13)))
    if not (gx < MAX_BYTES and gy < MAX_BYTES and gz < MAX_BYTES and bx < MAX_BYTES and by < MAX_BYTES and
            bz < MAX_BYTES and cx < MAX_BYTES and cy < MAX_BYTES and cz < MAX_BYTES and dynamic < MAX_BYTES and
            -1 <= static < MAX_BYTES and -MAX_INT32 <= result < MAX_INT32 and bx * by * bz <= MAX_BLOCK_THREADS):
        return None
    attributes = NO_ATTRIBUTES
    if result:  # the kernel's attributes at the refusal, -1 where absent
        values = tuple(-1 if value is None else int(value) for value in m.group(13, 14, 15))
        if not all(-1 <= value < MAX_BYTES for value in values):
            return None
        attributes = tuple(known(value) for value in values)
    return ((gx, gy, gz), (bx, by, bz), (cx, cy, cz), dynamic, None if static < 0 else static, result,
            m[16] == b"true", attributes)
