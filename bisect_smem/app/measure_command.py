"""The measuring command (the tool without a subcommand): measure every requested device, then show the
report, write it, save and compare baselines, and draw the plot.

``add_arguments(parser)`` puts its options on the tool's parser; ``parse(args)`` reads them once into a
frozen MeasureRequest, refusing before anything is measured what could not be honoured (every output is
checked then, app/output.py); ``run(args)`` returns the text for stdout and the exit code. Every requested
file is written, whatever became of the others, before the text is returned (app/delivery.py), so a
failure to print never costs a file; what a person needs to know meanwhile goes to stderr. The baselines
are compared before any is saved, and --save-baseline and --compare naming one folder are refused.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from bisect_smem import __version__
from bisect_smem.analysis.baseline import (
    Comparison,
    baseline_documents,
    baseline_path,
    compare_device,
    refuse_existing,
)
from bisect_smem.app import fleet_outputs, output
from bisect_smem.app.argtypes import int_in, non_negative_int, positive_float
from bisect_smem.app.delivery import Delivery
from bisect_smem.app.fleet_outputs import FleetPaths
from bisect_smem.app.progress import ProgressLine
from bisect_smem.app.render import FORMATS, baselines, plot
from bisect_smem.app.render import json as json_render
from bisect_smem.app.render.rows import RenderOptions
from bisect_smem.app.requests import ALL_BACKENDS, RunRequest, build_requests, planted_faults
from bisect_smem.app.worker import planned_steps
from bisect_smem.core.attributes import DeviceContext
from bisect_smem.core.errors import BackendUnavailable, BisectSmemError, ExitCode, UsageError
from bisect_smem.core.levels import DEFAULT_LEVEL, LEVELS
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.numbers import whole_number
from bisect_smem.core.profiles import cc_text
from bisect_smem.core.search import DEFAULT_CONFIRM, MAX_CONFIRM
from bisect_smem.devices.device_info import open_device
from bisect_smem.devices.host import host_context
from bisect_smem.experiments.config import MeasureConfig

MAX_RESTARTS = 100  # restarts of one device beyond which faults are not worth retrying


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The measuring options, on the tool's own parser."""
    add = parser.add_argument
    add("--device", type=non_negative_int, action="append", metavar="N",
        help="measure device N (repeatable; default: every visible device)")
    add("--simulate", action="append", metavar="PROFILE[,KEY=VALUE...]",
        help="measure a simulated device built from the published table (repeatable; see `bisect-smem profiles`). "
             "Faults: flaky=P, hole=BYTES, sticky=BYTES, hang=BYTES, seed=N, and for --level full "
             "bitflip=SM:OFFSET, holes=START-END, leak=yes|no; overrides: optin=BYTES, smem_per_sm=BYTES, "
             "reserved=BYTES, fewer=N; or REPORT.json[,device=N,FAULT...] to replay a saved device (what it did "
             "not measure stays unmeasured)")
    add("--backend", default=None, metavar="NAME",
        help="cupy (default), numba, all (every available backend, cross-checked), or sim (implied by --simulate)")
    add("--json", metavar="PATH", help="write the JSON report to PATH ('-' for stdout)")
    add("--format", choices=tuple(FORMATS), default="text",
        help="what stdout shows: text (default), markdown (GitHub tables, for a bug report) or json (the same as "
             "--json -)")
    add("--verbose", action="store_true", help="show every row instead of the compact table")
    add("--strict", action="store_true",
        help="exit 1 also when the device does better than a prediction or hint (`differs`)")
    add("--plot", metavar="PATH", help="draw the residency staircase to PATH (.png or .svg; needs the plot extra)")
    add("--save-baseline", metavar="DIR",
        help="save DIR/<gpu-model>/<driver>.json per GPU model (refuses to overwrite without --force)")
    add("--force", action="store_true", help="let --save-baseline replace an existing baseline")
    add("--compare", metavar="DIR", help="compare with the saved baseline for each GPU model; exit 1 on any regression")
    add("--allow-missing", action="store_true", help="with --compare: a missing baseline is reported, not an error")
    add("--level", choices=LEVELS, default=DEFAULT_LEVEL,
        help="quick: the limits only (default, attribute and opt-in ceilings, reserved, granularity); standard: "
             "every measurement; full: standard plus the shared memory itself (every SM and byte, every granule, "
             f"leftovers between processes); default {DEFAULT_LEVEL}")
    add("--confirm", type=int_in(1, MAX_CONFIRM), default=DEFAULT_CONFIRM, metavar="N",
        help=f"times the ceiling and ceiling+1 are each seen, 1..{MAX_CONFIRM} (default {DEFAULT_CONFIRM})")
    add("--device-timeout", type=positive_float, default=None, metavar="S",
        help="give up on a device after S seconds (default 300)")
    add("--probe-timeout", type=positive_float, default=None, metavar="S",
        help="a probe that takes longer ends its worker and counts as a timeout (default 5)")
    add("--max-restarts", type=int_in(0, MAX_RESTARTS), default=6, metavar="N",
        help=f"restarts of a device's worker after faults before the device is given up, 0..{MAX_RESTARTS} "
             "(default 6)")
    add("--inject-fault", action="append", metavar="FAULT", help=argparse.SUPPRESS)  # test only
    add("--inline", action="store_true", help="measure in this process instead of one worker process per device")
    add("--quiet", action="store_true", help="no progress on stderr")
    fleet_outputs.add_arguments(parser)


@dataclass(frozen=True)
class MeasureRequest:
    """A measuring run as the options asked for it, checked."""

    runs: tuple[RunRequest, ...]  # one per backend
    skipped: tuple[str, ...]  # with --backend all: why each backend that is not here was left out
    backend: str  # the report's backend: one name, or "all"
    level: str
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
    if args.level == "full" and args.backend in ("numba", ALL_BACKENDS):
        raise UsageError(f"--level full needs the cupy backend (or --simulate), not {args.backend!r}: "
                         "the validation kernels run through CuPy")
    timeouts_given = args.probe_timeout is not None or args.device_timeout is not None
    inject_step, planted = planted_faults(args.inject_fault, args.level)
    # A simulated device runs in this process unless its faults need a worker; a timeout needs one too.
    runs, skipped = build_requests(
        args.backend, args.simulate, devices=tuple(args.device) if args.device else None,
        config=MeasureConfig(confirm=args.confirm, level=args.level, planted=planted),
        isolate=False if args.inline else (True if timeouts_given else None),
        device_timeout_s=args.device_timeout or 300.0, probe_timeout_s=args.probe_timeout or 5.0,
        max_restarts=args.max_restarts, **_injected(inject_step))
    step_key = inject_step.rsplit("@", 1)[0] if inject_step else None
    if step_key is not None and runs and step_key not in {step.key for step in planned_steps(runs[0])}:
        raise UsageError(f"--inject-fault {inject_step}: no such step at --level {args.level}")
    backend = ALL_BACKENDS if args.backend == ALL_BACKENDS else runs[0].backend.name if runs else ALL_BACKENDS
    if args.json == "-" and args.format == "markdown":
        raise UsageError(f"--json - prints JSON on stdout; it cannot be combined with --format {args.format}")
    _check_options(args)
    json_path = output.output_path(args.json)
    fleet = fleet_outputs.check_paths(args)
    plot_path = Path(args.plot) if args.plot else None
    if plot_path is not None:
        plot.check_plot_path(plot_path)  # a plot's name has a suffix, so it is a path, never '-' or empty
        if args.level == "quick":
            raise UsageError("--plot draws the residency staircase, which --level quick does not measure")
        plot_path = output.output_path(args.plot, "the plot")
    return MeasureRequest(tuple(runs), tuple(skipped), backend, args.level, "json" if args.json == "-" else args.format,
                          RenderOptions(args.verbose, args.strict), json_path, fleet, plot_path,
                          Path(args.save_baseline) if args.save_baseline else None, args.force,
                          Path(args.compare) if args.compare else None, args.allow_missing,
                          not args.quiet and sys.stderr.isatty())


def _injected(text: str | None) -> dict[str, str | int | None]:
    """``--inject-fault STEP[@DEVICE]`` as the request's fields: the step, and the one device to fault on."""
    if text is None or "@" not in text:
        return {"inject_fault": text}
    step, device = text.rsplit("@", 1)
    try:
        return {"inject_fault": step, "inject_device": whole_number(device, "--inject-fault device")}
    except UsageError:
        raise UsageError(f"--inject-fault takes STEP or STEP@DEVICE, a device index (got {text!r})") from None


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
            raise UsageError(f"baseline folder {output.not_a_folder(args.compare)}")
        if not folder.exists():
            raise UsageError(f"baseline folder {args.compare} does not exist")
    if args.save_baseline:
        output.check_folder(args.save_baseline, "cannot save baselines in")
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
    if request.save_baseline and request.backend == "sim" and not request.force:
        _refuse_existing_sim_baselines(request.runs[0], request.save_baseline)
    report = Report(tool_version=__version__, created_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    host=platform.node(), backend=request.backend, devices=_measure(request),
                    host_context=host_context() if request.backend != "sim" else {}, level=request.level)
    # Compared before anything is saved: a run is never its own reference.
    comparisons = [compare_device(request.compare, dev) for dev in report.devices] if request.compare else None
    code = exit_code(report.devices, compare_code(report.devices, comparisons, request.allow_missing),
                     request.options.strict)
    regressions = {d.index: [baselines.regression_line(r) for r in c.regressions]
                   for d, c in zip(report.devices, comparisons or (), strict=False)}
    report = fleet_outputs.finish(report, code, request.options.strict, regressions, comparisons)
    document = json_render.render(report)
    shown = document if request.format == "json" else FORMATS[request.format](report, request.options)
    delivery = Delivery()
    if request.json_path is not None:
        delivery.file(request.json_path, "the report", document)
    fleet_outputs.deliver(report, request.fleet, delivery)
    refused = _baselines(report, request, delivery)
    if request.plot_path is not None:
        delivery.file(request.plot_path, "the plot", lambda: plot.render(report, plot.image_format(request.plot_path)),
                      note=None if plot.shows_something(report) else
                      f"warning: the plot {request.plot_path} shows nothing: no device measured the residency staircase")
    compared = _show_comparisons(report, comparisons, request.allow_missing, request.format == "json")
    _wait_for_workers()
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
                      note=f"saved baseline {path}")
    return None


def _measure(request: MeasureRequest) -> tuple[DeviceReport, ...]:
    """Every device of every backend asked for; no backend available is exit 3, naming why each is missing.
    When nothing could be measured (no GPU: exit 3; an error: exit 4), a report saying why is still written
    wherever one was asked for (and printed, where stdout has the JSON) before the error goes on to main."""
    try:
        return _measure_all(request)
    except BisectSmemError as exc:
        if exc.exit_code in (ExitCode.NO_GPU, ExitCode.INCOMPLETE):
            no_gpu = exc.exit_code == ExitCode.NO_GPU
            shown = fleet_outputs.write_failed(request.level, request.backend, request.json_path, request.fleet,
                                               exc.exit_code, f"no usable GPU: {exc}" if no_gpu else str(exc),
                                               request.format == "json")
            sys.stdout.write(shown or "")
        raise


def _measure_all(request: MeasureRequest) -> tuple[DeviceReport, ...]:
    if not request.runs:
        raise BackendUnavailable("; ".join(request.skipped))
    for reason in request.skipped:
        print(f"hint: not cross-checked: {reason}", file=sys.stderr)
    # Deferred: the runner supervises worker processes; a command that measures nothing must not load it.
    from bisect_smem.app.runner import run_all

    printer = ProgressLine(sys.stderr) if request.progress else None
    try:
        return run_all(list(request.runs), printer, wait_exits=False)  # waited for once the report is built
    finally:
        if printer is not None:
            printer.close()


def _wait_for_workers() -> None:
    """The workers' exits, which passed while the report was built: waited for before anything goes out."""
    # Deferred, as in _measure_all, which has loaded it by now.
    from bisect_smem.app.runner import wait_for_exits

    wait_for_exits()


def _refuse_existing_sim_baselines(run: RunRequest, directory: Path) -> None:
    """A simulated device's model and driver are known before it is measured, so an existing baseline
    is refused before any work; for a real GPU the same check runs after measuring, before any write."""
    specs = run.backend.specs
    paths = []
    for index in run.devices or range(len(specs)):
        if not 0 <= index < len(specs):
            continue  # the runner names the device that does not exist
        session, info = open_device(run.backend, index, run.config.static_sizes)
        session.close()
        stub = DeviceReport(index, info.identity.name, cc_text(info.identity.compute_capability), run.backend.name,
                            context=DeviceContext().with_nvml(info.nvml))
        paths.append(baseline_path(directory, stub))
    refuse_existing(paths, force=False)


def compare_code(devices: tuple[DeviceReport, ...], comparisons: list[Comparison] | None,
                 allow_missing: bool) -> int | None:
    """The exit code the comparisons call for, so that it says what happened: 1 for any regression, whatever
    else; else 4 for a device measured incompletely or a baseline saved from an incomplete run; else 2 for a
    missing baseline (unless allowed); else 0. None without --compare."""
    if comparisons is None:
        return None
    if any(c.regressions for c in comparisons):
        return ExitCode.MISMATCH
    if any(d.incomplete for d in devices) or any(c.unmeasured or c.baseline_problem for c in comparisons):
        return ExitCode.INCOMPLETE
    if any(c.baseline is None for c in comparisons) and not allow_missing:
        return ExitCode.USAGE
    return ExitCode.OK


def _show_comparisons(report: Report, comparisons: list[Comparison] | None, allow_missing: bool,
                      to_stderr: bool) -> str:
    """Each device's comparison with its baseline, for stdout (or already on stderr when stdout has the
    JSON); a missing baseline that is not allowed is also an error line on stderr."""
    text = ""
    if comparisons is None:
        return text
    for dev, result in zip(report.devices, comparisons, strict=True):
        shown = baselines.comparison(dev.index, result)
        if to_stderr:
            print(shown, end="", file=sys.stderr)
        else:
            text += shown
        if result.baseline is None and not allow_missing:
            print(f"error: {result.note} (use --allow-missing to accept)", file=sys.stderr)
    return text


def exit_code(devices: tuple[DeviceReport, ...], compare_code: int | None, strict: bool) -> int:
    """1 for a mismatch (or, strict, a ``differs`` row), 4 for an incomplete measurement, else 0."""
    if compare_code is not None:
        # Against a baseline, what the device reports is no longer the reference: the baseline is.
        if compare_code != ExitCode.OK:
            return compare_code
        return ExitCode.INCOMPLETE if any(d.incomplete for d in devices) else ExitCode.OK
    if any(d.mismatches for d in devices):
        return ExitCode.MISMATCH
    if any(d.incomplete for d in devices):
        return ExitCode.INCOMPLETE
    # A device that does better than a prediction or a hint is shown and counted, and fails only when asked.
    if strict and any(d.differences for d in devices):
        return ExitCode.MISMATCH
    return ExitCode.OK
