"""What a measurement writes for a fleet besides the report: the status fields, the Prometheus textfile
(``--prom``) and the NFD feature file (``--nfd``), and on exit 3 or 4 a report that says why.

Paths are checked before anything is measured (by the command, with outputs/writer.py); every file goes
out through a Delivery (outputs/delivery.py) and is written atomically (a dot file in the same folder,
then a rename: the textfile collector and NFD both ignore dot files).
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Sequence
from pathlib import Path

from bisect_smem import __version__
from bisect_smem.analysis.baseline import Comparison
from bisect_smem.analysis.summary import with_status
from bisect_smem.app.outputs.delivery import Delivery
from bisect_smem.app.render import nfd, prom
from bisect_smem.core.errors import ExitCode
from bisect_smem.core.frozen import frozen
from bisect_smem.core.jsonable import dumps
from bisect_smem.core.model import Report


@frozen
class FleetPaths:
    """Where --prom and --nfd write (None: not asked), checked before measuring."""

    prom: Path | None
    nfd: Path | None
    nfd_expiry_s: float


def finish(report: Report, code: int, strict: bool, regressions: dict[int, Sequence[str]] | None = None,
           comparisons: Sequence[Comparison] | None = None) -> Report:
    """The report with its status fields, for the run's exit code. A run that exits 2 because --compare found
    no baseline says so in ``error`` (every device measured, so no device's error would)."""
    missing = [c.note for c in comparisons or () if c.baseline is None]
    error = f"{missing[0]} (use --allow-missing to accept)" if code == ExitCode.USAGE and missing else None
    return with_status(report, code, strict, regressions, error=error)


def deliver(report: Report, paths: FleetPaths, delivery: Delivery) -> None:
    """The Prometheus and NFD files asked for, to be written with the run's other files."""
    if paths.prom is not None:
        delivery.file(paths.prom, "the metrics", prom.render(report))
    if paths.nfd is not None:
        delivery.file(paths.nfd, "the feature file", nfd.render(report, paths.nfd_expiry_s))


def write_failed(level: str, backend: str, json_path: Path | None, paths: FleetPaths, code: int, error: str,
                 json_stdout: bool) -> str | None:
    """A run that measured nothing (no GPU: exit 3; an error: exit 4) still leaves a valid report, with
    ``error`` set, wherever one was asked for: --json PATH, --prom and --nfd are written here, each whatever
    became of the others; the JSON for stdout (``json_stdout``: --json - or --format json) is returned to be
    printed, else None. A file that cannot be written is NotAllDelivered, which still carries that JSON."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report = with_status(Report(tool_version=__version__, created_utc=now, host=platform.node(), backend=backend,
                                devices=(), level=level), code, error=error)
    text = dumps(report.to_dict())
    delivery = Delivery()
    if json_path is not None:
        delivery.file(json_path, "the report", text)
    deliver(report, paths, delivery)
    delivery.write(text=text if json_stdout else "")
    return text if json_stdout else None
