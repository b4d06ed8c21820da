"""What a person or a program reads: tables (tabulate), JSON written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bisect_smem.model import DeviceReport, Report

TABLE_HEADERS = ("quantity", "reported", "source", "measured", "verdict", "note")


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def device_header(dev: DeviceReport) -> str:
    """One line naming the device and the context that explains differences."""
    ctx = dev.context
    driver = ctx.get("nvml_driver_version") or "unknown"
    cuda = ctx.get("cuda_driver_version")
    cuda_text = f" (CUDA {cuda // 1000}.{cuda % 1000 // 10})" if isinstance(cuda, int) and cuda else ""
    parts = [
        f"device {dev.index}: {dev.name or 'unknown device'}",
        f"cc {dev.compute_capability or '?'}",
        f"driver {driver}{cuda_text}",
        f"UUID {ctx.get('nvml_uuid') or 'unknown'}",
        f"virtualization {ctx.get('nvml_virtualization_mode') or 'unknown'}",
        f"MIG {ctx.get('nvml_mig_mode') or 'unknown'}",
        f"backend {dev.backend}",
    ]
    return " | ".join(parts)


def device_table(dev: DeviceReport) -> str:
    rows = [(v.quantity, _fmt(v.reported), _fmt(v.source), _fmt(v.measured), v.verdict, v.note) for v in dev.verdicts]
    return tabulate(rows, headers=TABLE_HEADERS, tablefmt="simple", disable_numparse=True)


def device_summary(dev: DeviceReport) -> str:
    counts = Counter(v.verdict for v in dev.verdicts)
    probes = sum(dev.measured.probes.values()) if dev.measured else 0
    verdicts = ", ".join(f"{counts[k]} {k}" for k in ("match", "MISMATCH", "ERROR", "info") if counts[k])
    elapsed = f", {dev.elapsed_s:.2f} s" if dev.elapsed_s is not None else ""
    return f"{verdicts or 'no verdicts'}; {probes} probes{elapsed}"


def render(report: Report) -> str:
    """The whole report as text: the host, then per device a header line, the table, a summary and any error."""
    from bisect_smem.environment import describe

    blocks = [f"host {report.host}: {describe(report.host_context)}"] if report.host_context else []
    for dev in report.devices:
        lines = [device_header(dev)]
        if dev.verdicts:
            lines.append(device_table(dev))
            lines.append(device_summary(dev))
        if dev.error:
            lines.append(f"error: {dev.error}")
        for event in dev.events:
            lines.append(f"event: {event.get('what')} ({event.get('where')})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` so that readers see the old file or the whole new one, never a part.

    The temporary file lives in the same folder (os.replace is atomic only within one file system)
    and is removed if anything fails, a full disk included.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        data = content.encode("utf-8") if isinstance(content, str) else content
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def output_path(text: str | None, what: str = "the report") -> Path | None:
    """The file to write for ``--json TEXT`` (None for none or '-'), checked before any work is done."""
    if not text or text == "-":
        return None
    path = Path(text)
    problem = check_writable(path)
    if problem:
        from bisect_smem.errors import UsageError

        raise UsageError(f"cannot write {what} to {text}: {problem}")
    return path


def check_writable(path: Path) -> str | None:
    """Why a report cannot be written to ``path``, or None when it can (checked before measuring)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder, not a file"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"folder {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"folder {parent} is not writable"
    return None
