"""The residency staircase and the carveout sweep as a picture (matplotlib, from the optional `plot` extra):
one panel per device, and a carveout panel beside it where the device has a sweep.

The plotted series are embedded in the image's metadata ("Description", as JSON), so the picture can
be checked against the report it was drawn from.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

from bisect_smem.core.errors import UsageError
from bisect_smem.core.levels import STAIRCASE_THREADS
from bisect_smem.core.model import DeviceReport, Report

IMAGE_FORMATS = {".png": "png", ".svg": "svg"}


def check_plot_path(path: Path) -> None:
    """Raise UsageError before any measuring if the plot cannot be made or written."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib: pip install matplotlib (the plot extra)")
    if path.suffix.lower() not in IMAGE_FORMATS:
        raise UsageError(f"--plot writes {', '.join(IMAGE_FORMATS)} files (got {path.name!r})")


def image_format(path: Path) -> str:
    """The image format a plot path asks for (checked by ``check_plot_path``)."""
    return IMAGE_FORMATS[path.suffix.lower()]


def staircase_series(dev: DeviceReport) -> dict[str, Any]:
    """What the picture shows for one device: sizes and blocks per SM, measured, API and formula."""
    steps = [s for s in (dev.measured.residency if dev.measured else ()) if s.threads == STAIRCASE_THREADS]
    return {
        "device": dev.index,
        "name": dev.name,
        "dynamic_bytes": [s.dynamic_bytes for s in steps],
        "measured_min": [s.blocks_per_sm_min for s in steps],
        "measured_max": [s.blocks_per_sm_max for s in steps],
        "api": [s.api_blocks_per_sm for s in steps],
        "formula": [s.formula_blocks_per_sm for s in steps],
        "ceiling_bytes": dev.measured.optin_dynamic_ceiling_bytes if dev.measured else None,
        **carveout_series(dev),
    }


def carveout_series(dev: DeviceReport) -> dict[str, list[int | None]]:
    """Blocks per SM under each carveout preference, measured and as the occupancy API predicts."""
    points = dev.measured.carveout if dev.measured else ()
    return {"carveout_percent": [p.percent for p in points],
            "carveout_measured": [p.blocks_per_sm for p in points],
            "carveout_api": [p.api_blocks_per_sm for p in points]}


def _carveout_panel(ax: Any, s: dict[str, Any]) -> None:
    """Measured against predicted blocks per SM over the carveout percentage; where they part is the finding."""
    percents = s["carveout_percent"]
    ax.step(percents, s["carveout_measured"], where="post", lw=2.5, label="measured")
    ax.step(percents, [a if a is not None else float("nan") for a in s["carveout_api"]], where="post", ls="--",
            lw=1.5, label="occupancy API")
    apart = [(p, m) for p, m, a in zip(percents, s["carveout_measured"], s["carveout_api"], strict=True)
             if a is not None and m != a]
    if apart:
        ax.plot(*zip(*apart, strict=True), "o", ms=5, label="measured differs from the API")
    ax.set_title(f"device {s['device']}: carveout sweep")
    ax.set_xlabel("carveout preference (%; -1 = default)")
    ax.set_ylabel("blocks resident per SM")
    ax.grid(alpha=0.3)
    ax.legend()


def shows_something(report: Report) -> bool:
    """True when some device measured the residency staircase: else the picture says only that nothing was."""
    return any(d.measured and d.measured.residency for d in report.devices)


def render(report: Report, fmt: str) -> bytes:
    """Blocks per SM against dynamic shared memory, one panel per device, as a ``fmt`` (png, svg) image."""
    # deferred: the plot extra is optional, and slow to import. A Figure of its own (not pyplot's) needs no
    # backend chosen and keeps no global state: savefig draws it with Agg.
    from matplotlib.figure import Figure

    series = [staircase_series(d) for d in report.devices if d.measured and d.measured.residency]
    columns = 2 if any(s["carveout_percent"] for s in series) else 1
    fig = Figure(figsize=(9 * columns, 4 * max(len(series), 1)))
    axes = fig.subplots(len(series) or 1, columns, squeeze=False)
    for row, s in enumerate(series):
        if s["carveout_percent"]:
            _carveout_panel(axes[row, 1], s)
        elif columns == 2:
            axes[row, 1].set_axis_off()
    for ax, s in zip(axes[:, 0], series, strict=False):
        end = s["ceiling_bytes"] or (s["dynamic_bytes"][-1] if s["dynamic_bytes"] else 0)
        xs = [x / 1024 for x in [*s["dynamic_bytes"], end]]
        ax.step(xs, [*s["measured_min"], s["measured_min"][-1]], where="post", lw=2.5, label="measured (min over SMs)")
        if s["measured_max"] != s["measured_min"]:
            ax.step(xs, [*s["measured_max"], s["measured_max"][-1]], where="post", lw=1, label="measured (max)")
        ax.plot([x / 1024 for x in s["dynamic_bytes"]], s["api"], "o", ms=5, label="occupancy API")
        ax.step(xs, [*s["formula"], s["formula"][-1]], where="post", ls="--", lw=1, label="formula")
        ax.set_title(f"device {s['device']}: {s['name']} ({STAIRCASE_THREADS}-thread blocks)")
        ax.set_xlabel("dynamic shared memory per block (KiB)")
        ax.set_ylabel("blocks resident per SM")
        ax.grid(alpha=0.3)
        ax.legend()
    if not series:
        axes[0, 0].text(0.5, 0.5, "nothing measured: no device measured the residency staircase",
                        ha="center", va="center", transform=axes[0, 0].transAxes)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata={"Description": json.dumps(series, sort_keys=True)})
    return buffer.getvalue()
