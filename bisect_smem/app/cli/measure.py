"""The measuring command (the tool without a subcommand): measure every requested device, then show the
report, write it, save and compare baselines, and draw the plot.

Its options are measure_options.py's; ``parse(args)`` reads them once into a frozen MeasureRequest,
refusing before anything is measured what could not be honoured (every output is checked then,
outputs/writer.py); ``run(args)`` returns the text for stdout and the exit code. The devices are measured,
and the Report with the host around them built, by the run wing (run/measure.py); the exit code it calls
for is analysis/outcome.py's; this module hands it to the renderers and delivers the files. Every
requested file is written, whatever became of the others, before the text is returned
(outputs/delivery.py), so a failure to print never costs a file; what a person needs to know meanwhile
goes to stderr (outputs/stderr.py). The baselines are compared before any is saved, and
--save-baseline and --compare naming one folder are refused.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bisect_smem.analysis.baseline import (
    Comparison,
    baseline_documents,
    baseline_path,
    compare_device,
    refuse_existing,
)
from bisect_smem.analysis.outcome import compare_code, exit_code
from bisect_smem.app.outputs import fleet, stderr, writer
from bisect_smem.app.outputs.delivery import Delivery, NotAllDelivered
from bisect_smem.app.outputs.fleet import FleetPaths
from bisect_smem.app.outputs.terminal import text_width
from bisect_smem.app.render import baselines, plot, renderer
from bisect_smem.app.render import json as json_render
from bisect_smem.app.render.rows import RenderOptions
from bisect_smem.app.run import measure as measuring
from bisect_smem.app.run.measure import Measurement
from bisect_smem.core import session as sessions
from bisect_smem.core.errors import BisectSmemError, ExitCode, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import Report
from bisect_smem.core.status import NFD_DEFAULT_EXPIRY_S


@frozen
class MeasureRequest:
    """A measuring run as the options asked for it, checked: what to measure, and what to do with it."""

    measurement: Measurement  # the backends and devices, planned by the run wing
    format: str  # what stdout shows (FORMATS); json as well with --json -
    options: RenderOptions
    json_path: Path | None
    fleet: FleetPaths  # --prom and --nfd
    plot_path: Path | None
    save_baseline: Path | None
    force: bool
    compare: Path | None
    allow_missing: bool
    progress: bool  # draw the progress line on stderr


def parse(args: argparse.Namespace) -> MeasureRequest:
    """The request; a UsageError for options that cannot be honoured, before anything is measured."""
    timeouts_given = args.probe_timeout is not None or args.device_timeout is not None
    # A simulated device runs in this process unless its faults need a worker; a timeout needs one too.
    measurement = measuring.plan_measurement(
        args.backend, args.simulate, args.device, level=args.level, confirm=args.confirm,
        isolate=False if args.inline else (True if timeouts_given else None), device_timeout_s=args.device_timeout,
        probe_timeout_s=args.probe_timeout, max_restarts=args.max_restarts, inject_fault=args.inject_fault)
    if args.json == "-" and args.format == "markdown":
        raise UsageError(f"--json - prints JSON on stdout; it cannot be combined with --format {args.format}")
    _check_options(args)
    json_path = writer.output_path(args.json)
    fleet_paths = _fleet_paths(args)
    plot_path = Path(args.plot) if args.plot else None
    if plot_path is not None:
        plot.check_plot_path(plot_path)  # a plot's name has a suffix, so it is a path, never '-' or empty
        if args.level == "quick":
            raise UsageError("--plot draws the residency staircase, which --level quick does not measure")
        plot_path = writer.output_path(args.plot, "the plot")
    if args.json == "-" or args.format == "json":
        _refuse_stdout_twice(args, {"--json": json_path, "--prom": fleet_paths.prom, "--nfd": fleet_paths.nfd})
    return MeasureRequest(measurement, "json" if args.json == "-" else args.format,
                          RenderOptions(args.verbose, args.strict, text_width()), json_path, fleet_paths, plot_path,
                          Path(args.save_baseline) if args.save_baseline else None, args.force,
                          Path(args.compare) if args.compare else None, args.allow_missing,
                          not args.quiet and stderr.is_terminal())


def _refuse_stdout_twice(args: argparse.Namespace, paths: dict[str, Path | None]) -> None:
    """stdout carries the JSON report alone (``--json -``, ``--format json``): a file that is stdout too
    would put a second format, or a second copy, into it."""
    for option, path in paths.items():
        if path is not None and writer.is_stdout(path):
            shown = "--json -" if args.json == "-" else "--format json"
            raise UsageError(f"{option} {path} is stdout, which {shown} gives to the JSON report alone; "
                             f"write {option} to a file")


def _fleet_paths(args: argparse.Namespace) -> FleetPaths:
    """The --prom and --nfd targets, refused (exit 2) before any work when they cannot be written."""
    paths = {}
    for option, what in (("prom", "the metrics"), ("nfd", "the feature file")):
        value = getattr(args, option)
        if value == "-":
            raise UsageError(f"--{option} writes a file for a collector to read; give a path, not '-'")
        paths[option] = writer.output_path(value, what) if value is not None else None
    if args.nfd_expiry is not None and paths["nfd"] is None:
        raise UsageError("--nfd-expiry only applies to --nfd")
    return FleetPaths(paths["prom"], paths["nfd"], args.nfd_expiry or NFD_DEFAULT_EXPIRY_S)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse options that would be ignored or could not be honoured."""
    for option in ("json", "plot", "save_baseline", "compare"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            raise UsageError(f"--{option.replace('_', '-')} was given an empty path (is a variable unset?)")
    if args.force and not args.save_baseline:
        raise UsageError("--force only applies to --save-baseline")
    if args.allow_missing and not args.compare:
        raise UsageError("--allow-missing only applies to --compare")
    if args.inline and (args.probe_timeout is not None or args.device_timeout is not None):
        raise UsageError("--inline measures in this process, which cannot end a hung probe: "
                         "drop --probe-timeout/--device-timeout or drop --inline")
    if args.compare:
        folder = Path(args.compare)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"baseline folder {writer.not_a_folder(args.compare)}")
        if not folder.exists():
            raise UsageError(f"baseline folder {args.compare} does not exist")
    if args.save_baseline:
        writer.check_folder(args.save_baseline, "cannot save baselines in")
    if args.save_baseline and args.compare and _same_folder(args.save_baseline, args.compare):
        raise UsageError(f"--save-baseline {args.save_baseline} and --compare {args.compare} are one folder: the "
                         "run would be saved over the baselines it is compared with; save into another folder")


def _same_folder(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """Measure, write what was asked for, and return the text for stdout and the exit code."""
    return execute(parse(args))


def execute(request: MeasureRequest) -> tuple[str, int]:
    """Run a parsed request: measure, render, write the files, compare; the text for stdout and the code."""
    measurement = request.measurement
    if request.save_baseline and measurement.simulated and not request.force:
        refuse_existing([baseline_path(request.save_baseline, stub)
                         for stub in measuring.simulated_devices(measurement.runs[0])], force=False)
    report = _measure(request)
    # Compared before anything is saved: a run is never its own reference.
    comparisons = [compare_device(request.compare, dev) for dev in report.devices] if request.compare else None
    code = exit_code(report.devices, compare_code(report.devices, comparisons, request.allow_missing),
                     request.options.strict)
    regressions = {d.index: [baselines.regression_line(r) for r in c.regressions]
                   for d, c in zip(report.devices, comparisons or (), strict=False)}
    report = fleet.finish(report, code, request.options.strict, regressions, comparisons)
    document = json_render.render(report)
    shown = document if request.format == "json" else renderer(request.format)(report, request.options)
    delivery = Delivery()
    if request.json_path is not None:
        delivery.file(request.json_path, "the report", document)
    fleet.deliver(report, request.fleet, delivery)
    refused = _baselines(report, request, delivery)
    if request.plot_path is not None:
        delivery.file(request.plot_path, "the plot", lambda: plot.render(report, plot.image_format(request.plot_path)),
                      note=None if plot.shows_something(report) else
                      f"warning: the plot {request.plot_path} shows nothing: no device measured the residency staircase")
    compared = _show_comparisons(report, comparisons, request.allow_missing, request.format == "json",
                                  request.options.width)
    measuring.wait_for_workers(sessions.current())
    delivery.write(refused, shown + compared)  # every file, then (from main) stdout
    return shown + compared, code


def _baselines(report: Report, request: MeasureRequest, delivery: Delivery) -> BisectSmemError | None:
    """The baselines to save, added to the delivery; a refusal (it exists, the run is incomplete) is returned
    to be raised once everything else was delivered."""
    if request.save_baseline is None:
        return None
    try:
        documents = baseline_documents(report, request.save_baseline, request.force)
    except BisectSmemError as exc:
        return exc
    for path, content in documents.items():
        delivery.file(path, "the baseline", content, exclusive=not request.force, folders=True,
                      note=f"saved baseline {path}", within=request.save_baseline)
    return None


def _measure(request: MeasureRequest) -> Report:
    """The report of every device of every backend asked for (the workers' exits still to wait for); no
    backend available is exit 3, naming why each is missing. When nothing could be measured (no GPU: exit 3;
    an error: exit 4), a report saying why is still written wherever one was asked for (and printed, where
    stdout has the JSON) before the error goes on to main."""
    measurement = request.measurement
    for reason in measurement.skipped if measurement.runs else ():
        stderr.say(f"not cross-checked: {reason}", "hint")
    try:
        return measuring.measure_report(measurement, stderr.stream() if request.progress else None, wait_exits=False,
                                        session=sessions.current())
    except BisectSmemError as exc:
        if exc.exit_code not in (ExitCode.NO_GPU, ExitCode.INCOMPLETE):
            raise
        no_gpu = exc.exit_code == ExitCode.NO_GPU
        shown = fleet.write_failed(measurement.level, measurement.backend, request.json_path, request.fleet,
                                   exc.exit_code, f"no usable GPU: {exc}" if no_gpu else str(exc),
                                   request.format == "json")
        if shown:
            raise NotAllDelivered(exc, shown) from exc
        raise


def _show_comparisons(report: Report, comparisons: list[Comparison] | None, allow_missing: bool,
                      to_stderr: bool, width: int) -> str:
    """Each device's comparison with its baseline, for stdout (or already on stderr when stdout has the
    JSON); a missing baseline that is not allowed is also an error line on stderr."""
    text = ""
    if comparisons is None:
        return text
    for dev, result in zip(report.devices, comparisons, strict=True):
        shown = baselines.comparison(dev.index, result, width)
        if to_stderr:
            stderr.say(shown, end="")
        else:
            text += shown
        if result.baseline is None and not allow_missing:
            stderr.say(f"{result.note} (use --allow-missing to accept)", "error")
    return text
