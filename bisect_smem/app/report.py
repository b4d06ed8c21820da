"""What a person or a program reads: tables (tabulate), JSON written atomically."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tabulate import tabulate

from bisect_smem.core.model import DeviceReport, Report

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
    from bisect_smem.devices.host import describe

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
