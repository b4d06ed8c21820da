"""A report as a Node Feature Discovery feature file (``features.d``), labels in the style of GPU feature
discovery: node-level, the minimum over the node's GPUs, under a namespace NFD always allows.

NFD reads ``<name>=<value>`` lines, ignores dot files and files over 65536 B, and drops the labels of a
file after its ``# +expiry-time=`` (RFC 3339). Names and values follow the Kubernetes label rules: a
value is empty or at most 63 characters of ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``, so every value
is slugged (``NVIDIA H200`` becomes ``NVIDIA-H200``).
"""

from __future__ import annotations

import datetime as dt
import math
import string
from collections.abc import Iterable

from bisect_smem.analysis.summary import summarize
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.quantities import Quantity, declared
from bisect_smem.core.status import NFD_DEFAULT_EXPIRY_S

NAMESPACE = "bisect-smem.feature.node.kubernetes.io"
MAX_FILE_BYTES = 65536  # NFD ignores a larger feature file
MAX_VALUE_CHARS = 63
_ALPHANUMERIC = frozenset(string.ascii_letters + string.digits)
_ALLOWED = _ALPHANUMERIC | frozenset("-_.")


def _trim(value: str) -> str:
    """``value`` without the characters at its ends that are not letters or digits."""
    start, end = 0, len(value)
    while start < end and value[start] not in _ALPHANUMERIC:
        start += 1
    while end > start and value[end - 1] not in _ALPHANUMERIC:
        end -= 1
    return value[start:end]


def slug(text: str) -> str:
    """``text`` as a valid label value: runs of other characters become ``-``, the ends are alphanumeric,
    at most 63 characters ('' when nothing is left)."""
    out: list[str] = []
    replaced = False  # the last character was one a label may not hold: its run is one "-"
    for char in text:
        if char in _ALLOWED:
            out.append(char)
        elif not replaced:
            out.append("-")
        replaced = char not in _ALLOWED
    value = _trim("".join(out))
    return _trim(value[:MAX_VALUE_CHARS])


def _minimum(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def verdict(report: Report) -> str:
    """The report's ``result`` (the word its JSON says: ``pass``, ``fail``, ``incomplete``, ``no_gpu``,
    ``bad_input``), except that a device that failed makes it ``fail``, and a device measured incompletely, or
    none measured, keeps a passing or unstated result from reading ``pass``."""
    statuses = [(d.summary or summarize(d)).status for d in report.devices]
    if "fail" in statuses or report.result == "fail":
        return "fail"
    if report.result not in (None, "pass"):
        return report.result
    return "pass" if statuses and "incomplete" not in statuses else "incomplete"


def _measured(devices: tuple[DeviceReport, ...], quantity: Quantity) -> int | None:
    return _minimum(quantity.of(d.measured) for d in devices)


def labels(report: Report) -> dict[str, str]:
    """The node's labels, by name within the namespace; a quantity no GPU measured is left out."""
    devices = report.devices
    names = {d.name for d in devices if d.name}
    drivers = [d.context.nvml_driver_version for d in devices if d.context.nvml_driver_version]
    found: dict[str, object] = {
        "gpu.count": len(report.by_gpu()),
        "gpu.product": (names.pop() if len(names) == 1 else "mixed") if names else None,
        # Each declared quantity with a node label: the minimum over the node's GPUs.
        **{q.nfd: _measured(devices, q) for q in declared("measured") if q.nfd is not None},
        "verdict": verdict(report),
        "driver": drivers[0] if drivers else None,
        "timestamp": report.created_unix_seconds,
    }
    return {name: slug(str(value)) for name, value in found.items() if value is not None and slug(str(value))}


def expires_at(report: Report, expiry_s: float = NFD_DEFAULT_EXPIRY_S) -> int:
    """When the labels expire, in Unix seconds: the report's time plus ``expiry_s`` rounded up (NFD reads whole
    seconds)."""
    return report.created_unix_seconds + math.ceil(expiry_s)


def expiry_text(expires: float) -> str:
    """An expiry time (seconds since the epoch) as NFD's +expiry-time reads it: UTC, whole seconds."""
    return dt.datetime.fromtimestamp(expires, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(report: Report, expiry_s: float = NFD_DEFAULT_EXPIRY_S) -> str:
    """The feature file: the expiry line (the report's time plus ``expiry_s`` seconds, rounded up to a whole
    second), then one label a line."""
    # NFD reads whole seconds: a fraction cut off would expire 0.5 s labels at the second they were measured.
    lines = [f"# +expiry-time={expiry_text(expires_at(report, expiry_s))}", *(f"{NAMESPACE}/{name}={value}" for name, value in labels(report).items())]
    text = "\n".join(lines) + "\n"
    if len(text.encode()) > MAX_FILE_BYTES:
        raise ValueError(f"the feature file would be {len(text.encode())} B; NFD ignores files over {MAX_FILE_BYTES} B")
    return text
