"""What a traced process asked the driver for: frozen records of attribute sets, launches and graph kernel
nodes, read from the collector's JSON lines (one file per process) with every input bounded.

A runtime call (cudaFuncSetAttribute, cudaLaunchKernel) and the driver call it makes carry the same correlation
id: they are read as one record, named after the runtime call the program made, with the driver's kernel name
and static shared memory. Names stay as the driver gave them (mangled); demangling is the analysis's job.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisect_smem.core import input as reader

MAX_TRACE_FILES = 4096  # processes in one trace
MAX_TRACE_FILE_BYTES = 64 << 20
MAX_LINE_BYTES = 1 << 20  # a CUTLASS kernel's mangled name is a few KiB; a line is its name and some numbers
MAX_NUMBER = 1 << 63  # every number the collector writes fits in 64 bits
MAX_TRACE_DIGITS = 20



class FunctionAttribute(enum.IntEnum):
    """The shared-memory attributes of a kernel: cudaFuncAttribute and CUfunction_attribute share these
    numbers (driver_types.h, cuda.h)."""

    MaxDynamicSharedMemorySize = 8
    PreferredSharedMemoryCarveout = 9
    ClusterDimMustBeSet = 10
    RequiredClusterWidth = 11
    RequiredClusterHeight = 12
    RequiredClusterDepth = 13
    NonPortableClusterSizeAllowed = 14
    ClusterSchedulingPolicyPreference = 15


MAX_DYNAMIC_SHARED = FunctionAttribute.MaxDynamicSharedMemorySize
# CUresult and cudaError_t names of the results a shared-memory request meets (cuda.h, driver_types.h).
DRIVER_RESULTS = dict([(0, "success"), (1, "invalid value"), (98, "invalid device function"), (200, "invalid image"),
                       (209, "no binary for GPU"), (400, "invalid handle"), (500, "not found"),
                       (701, "launch out of resources"), (801, "not supported"), (912, "invalid cluster size")])
RUNTIME_RESULTS = dict([(0, "success"), (1, "invalid value"), (98, "invalid device function"),
                        (209, "no kernel image for device"), (400, "invalid resource handle"),
                        (701, "too many resources requested for launch"), (801, "operation not supported"),
                        (912, "invalid cluster size")])


class TraceError(reader.InputError):
    """A trace folder or line that cannot be read (exit 2): the text says which and why."""


def result_text(domain: str, code: int) -> str:
    """A call's result in words: the driver's or the runtime's name for ``code``."""
    names = DRIVER_RESULTS if domain == "driver" else RUNTIME_RESULTS
    return names.get(code, f"error {code}")


@dataclass(frozen=True)
class Process:
    """One traced process: whether it was traced, and which libcupti it used."""

    pid: int
    ppid: int
    command: str
    collector: str  # "c" or "python"
    cupti_library: str
    cupti_found: str  # "already loaded", "BISECT_SMEM_CUPTI_LIBRARY", "none"
    untraced: str | None  # why nothing of it was recorded, or None


@dataclass(frozen=True)
class AttributeSet:
    """cuFuncSetAttribute, cuKernelSetAttribute or cudaFuncSetAttribute of a shared-memory attribute."""

    pid: int
    api: str  # the call the program made (the runtime's where it made one)
    driver_api: str | None  # the driver call underneath, when recorded
    correlation: int
    attribute: int
    value: int
    result: int  # of the call the program made
    result_domain: str  # "driver" or "runtime": whose numbering ``result`` uses
    static_bytes: int | None  # the kernel's static shared memory, as the driver reports it
    kernel: str | None  # mangled, as the driver reports it

    @property
    def attribute_name(self) -> str:
        """The attribute's name without its prefix (MaxDynamicSharedMemorySize)."""
        try:
            return FunctionAttribute(self.attribute).name
        except ValueError:
            return f"attribute {self.attribute}"

    @property
    def refused(self) -> bool:
        """The call did not succeed."""
        return self.result != 0


@dataclass(frozen=True)
class Launch:
    """A launch configuration (counted: the collector writes each once) or a graph kernel node."""

    pid: int
    api: str
    correlation: int
    kernel: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]  # (0, 0, 0) when none was given at launch
    dynamic_bytes: int
    static_bytes: int | None
    result: int
    result_domain: str
    captured: bool  # launched into a stream under graph capture
    graph_node: bool  # added to a graph by hand (cuGraphAddKernelNode)
    count: int

    @property
    def refused(self) -> bool:
        """The launch (or node) did not succeed."""
        return self.result != 0


@dataclass(frozen=True)
class Trace:
    """Everything recorded under one --out folder."""

    processes: tuple[Process, ...]
    attribute_sets: tuple[AttributeSet, ...]
    launches: tuple[Launch, ...]
    torn_lines: int  # lines cut short by a process that was killed while writing


def read_trace(folder: Path) -> Trace:
    """Every PID.jsonl file of ``folder``; a TraceError for a folder or line that is not the collector's."""
    if not folder.is_dir():
        raise TraceError(f"{folder} is not a folder of traces")
    files = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")
    if len(files) > MAX_TRACE_FILES:
        raise TraceError(f"{folder}: {len(files)} trace files, more than {MAX_TRACE_FILES}")
    processes, attributes, launches, torn = [], [], [], 0
    for path in files:
        records, cut = _records(path)
        torn += cut
        p, a, lnch = _process_records(records)
        processes += p
        attributes += a
        launches += lnch
    return Trace(tuple(processes), tuple(attributes), tuple(launches), torn)


def _records(path: Path) -> tuple[list[dict[str, Any]], int]:
    data = reader.read_file(path, MAX_TRACE_FILE_BYTES).data
    lines, torn = data.split(b"\n"), 0
    if lines and not lines[-1]:
        lines.pop()
    elif lines:
        lines.pop()  # no newline: the process was killed while writing it
        torn = 1
    return [_record(path, i + 1, line) for i, line in enumerate(lines)], torn


def _record(path: Path, number: int, line: bytes) -> dict[str, Any]:
    where = f"{path.name} line {number}"
    if len(line) > MAX_LINE_BYTES:
        raise TraceError(f"{where}: longer than {MAX_LINE_BYTES} bytes")
    try:
        value = json.loads(line, parse_int=lambda digits: _number(digits, where))
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{where}: not a JSON object ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("event"), str):
        raise TraceError(f"{where}: not an event of the collector")
    for key, field in value.items():  # flat: numbers, strings, booleans, null and lists of three numbers
        if isinstance(field, (dict, list)) and not _triple(field):
            raise TraceError(f"{where}: {key} is not a value the collector writes")
    return value


def _number(digits: str, where: str) -> int:
    if len(digits.lstrip("-")) > MAX_TRACE_DIGITS or abs(int(digits)) >= MAX_NUMBER:
        raise TraceError(f"{where}: {digits[:24]} is not a number the collector writes")
    return int(digits)


def _triple(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) and v >= 0 for v in value)


def _process_records(records: list[dict[str, Any]]) -> tuple[list[Process], list[AttributeSet], list[Launch]]:
    """One file's records as events: runtime and driver calls with one correlation id merged, counts applied."""
    pid = next((r.get("pid") for r in records if r["event"] == "process"), None)
    pid = pid if isinstance(pid, int) else -1
    processes = [_process(r) for r in records if r["event"] == "process"]
    counts = {r.get("id"): r.get("count") for r in records if r["event"] == "count"}
    driver_attrs = {r.get("correlation"): r for r in records if r["event"] == "attribute" and r.get("domain") == "driver"}
    attributes = []
    for r in records:
        if r["event"] == "attribute" and r.get("domain") == "runtime":
            attributes.append(_attribute(pid, r, driver_attrs.pop(r.get("correlation"), None)))
    attributes += [_attribute(pid, r, None) for r in driver_attrs.values()]
    attributes.sort(key=lambda a: a.correlation)
    driver_launches = {r.get("correlation") for r in records if r["event"] in ("launch", "graph_node")
                       and r.get("domain") == "driver"}
    runtime_api = {r.get("correlation"): r for r in records if r["event"] in ("launch", "graph_node")
                   and r.get("domain") == "runtime"}
    launches = []
    for r in records:
        if r["event"] not in ("launch", "graph_node"):
            continue
        if r.get("domain") == "runtime" and r.get("correlation") in driver_launches:
            continue  # the driver's record of the same call holds the kernel's name and static bytes
        count = counts.get(r.get("id"), 1)
        launches.append(_launch(pid, r, runtime_api.get(r.get("correlation")) if r.get("domain") == "driver"
                                else None, count if isinstance(count, int) and count > 0 else 1))
    return processes, attributes, launches


def _text(r: dict[str, Any], key: str, default: str = "") -> str:
    value = r.get(key)
    return value if isinstance(value, str) else default


def _int(r: dict[str, Any], key: str, default: int = 0) -> int:
    value = r.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _process(r: dict[str, Any]) -> Process:
    untraced = r.get("untraced")
    return Process(_int(r, "pid", -1), _int(r, "ppid", -1), _text(r, "command"), _text(r, "collector"),
                   _text(r, "cupti_library"), _text(r, "cupti_found"), untraced if isinstance(untraced, str) else None)


def _static(r: dict[str, Any] | None) -> int | None:
    value = None if r is None else r.get("static_bytes")
    return value if isinstance(value, int) and value >= 0 else None


def _attribute(pid: int, r: dict[str, Any], driver: dict[str, Any] | None) -> AttributeSet:
    source = driver or r
    return AttributeSet(pid, _text(r, "api", "?"), _text(driver, "api") if driver else None, _int(r, "correlation"),
                        _int(r, "attribute"), _int(r, "value"), _int(r, "result"), _text(r, "domain", "driver"),
                        _static(source), source.get("name") if isinstance(source.get("name"), str) else None)


def _launch(pid: int, r: dict[str, Any], runtime: dict[str, Any] | None, count: int) -> Launch:
    def dims(key: str) -> tuple[int, int, int]:
        value = r.get(key)
        return (value[0], value[1], value[2]) if _triple(value) else (0, 0, 0)

    name = r.get("name") if isinstance(r.get("name"), str) else None
    api, result, domain = _text(r, "api", "?"), _int(r, "result"), _text(r, "domain", "driver")
    if runtime is not None:  # the call the program made, and the result it saw
        api, result, domain = _text(runtime, "api", api), _int(runtime, "result", result), "runtime"
        name = name or (runtime.get("name") if isinstance(runtime.get("name"), str) else None)
    return Launch(pid, api, _int(r, "correlation"), name, dims("grid"), dims("block"), dims("cluster"),
                  _int(r, "dynamic_bytes"), _static(r), result, domain, r.get("captured") is True,
                  r["event"] == "graph_node", count)
