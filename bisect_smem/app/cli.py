"""Command line: argparse, subcommands and exit codes. The only module that prints or exits.

Exit codes: 0 no limit or source disagrees (``differs`` allowed unless --strict); 1 a mismatch or regression; 2 bad usage or input;
3 no usable GPU or backend; 4 a measurement could not be completed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from bisect_smem import __version__
from bisect_smem.app import check_command, export_command, fit_command, fleet_outputs, schema_command
from bisect_smem.app.argtypes import non_negative_int, positive_float, positive_int
from bisect_smem.core.errors import (
    INTERRUPTED,
    SIGNAL_EXIT_BASE,
    BackendUnavailable,
    BaselineError,
    BisectSmemError,
    ExitCode,
    UsageError,
)
from bisect_smem.core.levels import DEFAULT_LEVEL, LEVELS
from bisect_smem.core.search import DEFAULT_CONFIRM
from bisect_smem.core.text import dash

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_NO_GPU, EXIT_INCOMPLETE = (ExitCode.OK, ExitCode.MISMATCH, ExitCode.USAGE,
                                                            ExitCode.NO_GPU, ExitCode.INCOMPLETE)
# Subcommands whose module has add_parser(sub) and run(args) -> (text for stdout, exit code).
SUBCOMMANDS = {"check": check_command, "export": export_command, "schema": schema_command}

EXIT_CODES_HELP = """exit codes:
  0  no limit or source disagrees (rows that differ from a prediction or hint allowed, unless --strict)
  1  a mismatch or regression was found (or, with --strict, a row that differs)
  2  bad usage or bad input, or a file or stream that cannot be written (a full disk, a closed or
     broken stdout)
  3  no usable GPU or backend
  4  a measurement could not be completed
  128+N  ended by signal N (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM): workers ended, no report written
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line and exit code 2, as every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Every option of the tool and its subcommands, with the exit codes in the epilog."""
    parser = _Parser(
        prog="bisect-smem",
        description="Measure how much shared memory a CUDA kernel can really get on each GPU, and check it "
                    "against what the driver, the runtime, NVML and the published table report.",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bisect-smem {__version__}")
    parser.add_argument("--device", type=non_negative_int, action="append", metavar="N",
                        help="measure device N (repeatable; default: every visible device)")
    parser.add_argument("--simulate", action="append", metavar="PROFILE[,KEY=VALUE...]",
                        help="measure a simulated device built from the published table (repeatable; see "
                             "`bisect-smem profiles`). Faults: flaky=P, hole=BYTES, sticky=BYTES, hang=BYTES, "
                             "seed=N; overrides: optin=BYTES, smem_per_sm=BYTES, reserved=BYTES, fewer=N; or REPORT.json"
                             "[,device=N,FAULT...] to replay a saved device")
    parser.add_argument("--backend", default=None, metavar="NAME",
                        help="cupy (default), numba, all (every available backend, cross-checked), or sim "
                             "(implied by --simulate)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-' for stdout)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                        help="what stdout shows: text (default), markdown (GitHub tables, for a bug report) or "
                             "json (the same as --json -)")
    parser.add_argument("--verbose", action="store_true",
                        help="show every row instead of the compact table")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 also when the device does better than a prediction or hint (`differs`)")
    parser.add_argument("--plot", metavar="PATH", help="draw the residency staircase to PATH (.png or .svg; "
                                                       "needs the plot extra)")
    parser.add_argument("--save-baseline", metavar="DIR",
                        help="save DIR/<gpu-model>/<driver>.json per GPU model (refuses to overwrite without --force)")
    parser.add_argument("--force", action="store_true", help="let --save-baseline replace an existing baseline")
    parser.add_argument("--compare", metavar="DIR",
                        help="compare with the saved baseline for each GPU model; exit 1 on any regression")
    parser.add_argument("--allow-missing", action="store_true",
                        help="with --compare: a missing baseline is reported, not an error")
    parser.add_argument("--level", choices=LEVELS, default=DEFAULT_LEVEL,
                        help="quick: the limits only (default, attribute and opt-in ceilings, reserved, "
                             "granularity); standard: every measurement; full: standard plus the shared memory "
                             "itself (every SM and byte, every granule, leftovers between processes); "
                             f"default {DEFAULT_LEVEL}")
    parser.add_argument("--confirm", type=positive_int, default=DEFAULT_CONFIRM, metavar="N",
                        help=f"times the ceiling and ceiling+1 are each seen (default {DEFAULT_CONFIRM})")
    parser.add_argument("--device-timeout", type=positive_float, default=None, metavar="S",
                        help="give up on a device after S seconds (default 300)")
    parser.add_argument("--probe-timeout", type=positive_float, default=None, metavar="S",
                        help="a probe that takes longer ends its worker and counts as a timeout (default 5)")
    parser.add_argument("--max-restarts", type=non_negative_int, default=6, metavar="N",
                        help="restarts of a device's worker after faults before the device is given up (default 6)")
    parser.add_argument("--inject-fault", metavar="STEP", help=argparse.SUPPRESS)  # test only
    parser.add_argument("--inline", action="store_true",
                        help="measure in this process instead of one worker process per device")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fleet_outputs.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("profiles", help="list the published per-architecture profiles")
    merge = sub.add_parser("merge", help="one table from many hosts' JSON reports; exit 1 when any deviates",
                           epilog="exit codes: 0 every device agrees with its group's majority; 1 some deviate; "
                                  "2 a file is not a report")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")
    fit_command.add_parser(sub)
    for command in SUBCOMMANDS.values():
        command.add_parser(sub)
    return parser


class Terminated(BaseException):
    """SIGTERM or SIGHUP: raised where the program is, like KeyboardInterrupt, so that the runner's
    cleanup ends every worker."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse, run, and map every outcome to one line and an exit code."""
    if sys.stderr is None:  # closed by the caller: errors go nowhere, never to stdout
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    if sys.stdout is None:
        return _fail(EXIT_USAGE, "stdout is closed; nothing could be reported")
    previous = _install_signal_handlers()
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except Terminated as exc:
        return _fail(SIGNAL_EXIT_BASE + exc.signum, f"{signal.Signals(exc.signum).name} received; workers ended, "
                                       "no report was written")
    except OSError as exc:  # stdout to a full device, a broken pipe
        _silence_stdout()
        return _fail(EXIT_USAGE, f"cannot write the output to stdout: {exc.strerror or exc}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _install_signal_handlers() -> dict[int, object]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, _raise_terminated) for signum in (signal.SIGTERM, signal.SIGHUP)}


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        if args.command == "profiles":
            return _cmd_profiles()
        if args.command == "merge":
            return _cmd_merge(list(args.reports))
        if args.command == "fit":
            text, code = fit_command.run(args)
            sys.stdout.write(text)
            return code
        if args.command in SUBCOMMANDS:
            text, code = SUBCOMMANDS[args.command].run(args)
            sys.stdout.write(text)
            return code
        return _cmd_measure(args)
    except BisectSmemError as exc:
        return _fail(exc.exit_code, exc.describe())
    except KeyboardInterrupt:
        return _fail(INTERRUPTED, "interrupted; no report was written")


def _fail(code: int, message: str, stream: TextIO | None = None) -> int:
    try:
        print(f"error: {message}", file=stream or sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr itself is gone: the exit code still says what happened
    return code


def _cmd_profiles() -> int:
    from tabulate import tabulate

    from bisect_smem.core.profiles import PROFILES

    rows = [(p.key, p.cc_string, ", ".join(p.aliases), p.example_parts, p.smem_per_sm_bytes,
             p.max_smem_per_block_optin_bytes, dash(p.reserved_smem_per_block_bytes),
             ", ".join(map(str, p.carveout_kib)) if p.carveout_kib else "-", "yes" if p.confirmed else "no")
            for p in PROFILES]
    print(tabulate(rows, headers=("profile", "cc", "aliases", "parts", "smem/SM B", "opt-in/block B",
                                  "reserved B", "carveouts KiB", "confirmed"), disable_numparse=True))
    return EXIT_OK


def _cmd_merge(paths: list[str]) -> int:
    from bisect_smem.analysis.merge import group_reports
    from bisect_smem.app.report import merge_table

    groups = group_reports(paths)
    print(merge_table(groups))
    for g in groups:
        for label, diffs in g.deviations.items():
            for line in diffs:
                print(f"{label}: {line}")
        for name, values in g.ties.items():
            print(f"{g.model} (driver {g.driver}): {name}: a tie between {', '.join(map(repr, values))}; "
                  f"no majority, nobody blamed")
    return EXIT_MISMATCH if any(g.deviations or g.ties for g in groups) else EXIT_OK


def _cmd_measure(args: argparse.Namespace) -> int:
    from bisect_smem.app import output
    from bisect_smem.app.requests import ALL_BACKENDS, build_requests
    from bisect_smem.core.model import Report, dumps
    from bisect_smem.devices.host import host_context
    from bisect_smem.experiments.measure import MeasureConfig

    if args.level == "full" and args.backend in ("numba", ALL_BACKENDS):
        raise UsageError(f"--level full needs the cupy backend (or --simulate), not {args.backend!r}: "
                         "the validation kernels run through CuPy")
    timeouts_given = args.probe_timeout is not None or args.device_timeout is not None
    # A simulated device runs in this process unless its faults need a worker; a timeout needs one too.
    requests, skipped = build_requests(
        args.backend, args.simulate, devices=tuple(args.device) if args.device else None,
        config=MeasureConfig(confirm=args.confirm, level=args.level),
        isolate=False if args.inline else (True if timeouts_given else None),
        device_timeout_s=args.device_timeout or 300.0, probe_timeout_s=args.probe_timeout or 5.0,
        max_restarts=args.max_restarts, inject_fault=args.inject_fault)
    backend = ALL_BACKENDS if args.backend == ALL_BACKENDS else requests[0].backend.name
    if args.json == "-" and args.format == "markdown":
        raise UsageError(f"--json - prints JSON on stdout; it cannot be combined with --format {args.format}")
    _check_measure_options(args)
    json_path = output.output_path(args.json)
    fleet = fleet_outputs.check_paths(args)
    plot_path = Path(args.plot) if args.plot else None
    if plot_path is not None:
        from bisect_smem.app.plot import check_plot_path

        check_plot_path(plot_path)  # a plot's name has a suffix, so it is a path, never '-' or empty
        plot_path = output.output_path(args.plot, "the plot")
    if args.save_baseline and backend == "sim" and not args.force:
        _refuse_existing_sim_baselines(requests[0], Path(args.save_baseline))

    devices = _measure(requests, skipped, args, lambda code, error: fleet_outputs.write_failed(
        args, backend, json_path, fleet, code, error))
    report = Report(tool_version=__version__, created_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    host=platform.node(), backend=backend, devices=devices,
                    host_context=host_context() if backend != "sim" else {}, level=args.level)
    baselines = _baseline_documents(report, args)
    comparisons = _comparisons(report, Path(args.compare)) if args.compare else None
    code = _exit_code(devices, _compare_code(comparisons, args.allow_missing), args.strict)
    report = fleet_outputs.finish(report, code, args.strict,
                                  {d.index: c.regressions for d, c in zip(devices, comparisons or (), strict=False)})
    text = dumps(report.to_dict())
    _print_report(report, text, args)
    if json_path is not None:
        output.write_atomic(json_path, text, what="the report")
    fleet_outputs.write(report, fleet)
    for path, document in baselines.items():
        output.make_folders(path, "the baseline")
        output.write_atomic(path, document, exclusive=not args.force, what="the baseline")
        print(f"saved baseline {path}", file=sys.stderr)
    if comparisons is not None:
        _compare(report, comparisons, args.allow_missing, args.json == "-" or args.format == "json")
    if plot_path is not None:
        from bisect_smem.app.plot import plot_staircase

        plot_staircase(devices, plot_path)
    return code


def _measure(requests: list[Any], skipped: list[str], args: argparse.Namespace,
             write_failed: Callable[[int, str], str | None]) -> tuple[Any, ...]:
    """The devices' reports, with progress on a terminal. When nothing could be measured (no GPU: exit 3;
    an error: exit 4), ``write_failed`` leaves a report saying why where one was asked for, and the
    error goes on to main."""
    printer = _ProgressPrinter(sys.stderr) if not args.quiet and sys.stderr.isatty() else None
    try:
        return _run_backends(requests, skipped, printer)
    except BisectSmemError as exc:
        if not isinstance(exc, UsageError | BaselineError):
            no_gpu = isinstance(exc, BackendUnavailable)
            shown = write_failed(EXIT_NO_GPU if no_gpu else EXIT_INCOMPLETE,
                                 f"no usable GPU: {exc}" if no_gpu else str(exc))
            sys.stdout.write(shown or "")
        raise
    finally:
        if printer is not None:
            printer.close()


def _check_measure_options(args: argparse.Namespace) -> None:
    """Refuse, before any measuring, options that would be ignored or could not be honoured."""
    from bisect_smem.app import output

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
            raise UsageError(f"baseline folder {args.compare} is a file, not a folder")
        if not folder.exists():
            raise UsageError(f"baseline folder {args.compare} does not exist")
    if args.save_baseline:
        output.check_folder(args.save_baseline, "cannot save baselines in")


def _baseline_documents(report, args: argparse.Namespace) -> dict:
    """The baselines to save, refused (exit 2) before anything is written when one cannot be."""
    if not args.save_baseline:
        return {}
    from bisect_smem.analysis.baseline import baseline_documents

    return baseline_documents(report, Path(args.save_baseline), force=args.force)


def _refuse_existing_sim_baselines(request, directory: Path) -> None:
    """A simulated device's model and driver are known before it is measured, so an existing baseline
    is refused before any work; for a real GPU the same check runs after measuring, before any write."""
    from bisect_smem.analysis.baseline import baseline_path, refuse_existing
    from bisect_smem.core.attributes import DeviceContext
    from bisect_smem.core.model import DeviceReport
    from bisect_smem.core.profiles import cc_text
    from bisect_smem.devices.device_info import open_device

    specs = request.backend.specs
    paths = []
    for index in request.devices or range(len(specs)):
        if not 0 <= index < len(specs):
            continue  # the runner names the device that does not exist
        session, info = open_device(request.backend, index, request.config.static_sizes)
        session.close()
        cc = info.identity.compute_capability
        stub = DeviceReport(index, info.identity.name, cc_text(cc), request.backend.name,
                            context=DeviceContext().with_nvml(info.nvml))
        paths.append(baseline_path(directory, stub))
    refuse_existing(paths, force=False)


def _print_report(report, text: str, args: argparse.Namespace) -> None:
    """The report on stdout in the format asked for: JSON, Markdown or the text with its headline."""
    from bisect_smem.app import report as report_mod

    if args.json == "-" or args.format == "json":
        sys.stdout.write(text)
    elif args.format == "markdown":
        print(report_mod.render_markdown(report, verbose=args.verbose, strict=args.strict))
    else:
        print(report_mod.render(report, verbose=args.verbose, strict=args.strict))


def _exit_code(devices, compare_code: int | None, strict: bool) -> int:
    """1 for a mismatch (or, strict, a ``differs`` row), 4 for an incomplete measurement, else 0."""
    if compare_code is not None:
        # Against a baseline, what the device reports is no longer the reference: the baseline is.
        if compare_code != EXIT_OK:
            return compare_code
        return EXIT_INCOMPLETE if any(d.incomplete for d in devices) else EXIT_OK
    if any(d.mismatches for d in devices):
        return EXIT_MISMATCH
    if any(d.incomplete for d in devices):
        return EXIT_INCOMPLETE
    # A device that does better than a prediction or a hint is shown and counted, and fails only when asked.
    if strict and any(d.differences for d in devices):
        return EXIT_MISMATCH
    return EXIT_OK


def _run_backends(requests: list[Any], skipped: list[str], printer: Any) -> tuple[Any, ...]:
    """Measure through each backend asked for; with several (``--backend all``), add cross-check rows.
    No backend available is exit 3, naming why each is missing."""
    from bisect_smem.analysis.crosscheck import with_cross_checks
    from bisect_smem.app.runner import run

    if not requests:
        raise BackendUnavailable("; ".join(skipped))
    if len(requests) == 1 and not skipped:
        return run(requests[0], printer)
    for reason in skipped:
        print(f"hint: not cross-checked: {reason}", file=sys.stderr)
    return with_cross_checks(run_concurrently(requests, run, printer))


def run_concurrently(requests: list[Any], run: Any, printer: Any) -> dict[str, Any]:
    """Each request's reports by backend name. Backends measured in worker processes run side by side,
    so numba's start and compile overlap CuPy's run; the first runs on this thread, which keeps Ctrl-C
    and its workers' cleanup where they were (the others' workers are daemons). In-process runs, which
    would share one CUDA context, run one after another."""
    import threading

    if not all(r.isolated for r in requests):
        return {r.backend.name: run(r, printer) for r in requests}
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}

    def one(i: int) -> None:
        try:
            results[i] = run(requests[i], printer)
        except Exception as exc:  # noqa: BLE001 - re-raised on the calling thread below
            errors[i] = exc

    others = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(1, len(requests))]
    for thread in others:
        thread.start()
    results[0] = run(requests[0], printer)
    for thread in others:
        thread.join()
    for i in sorted(errors):
        raise errors[i]
    return {r.backend.name: results[i] for i, r in enumerate(requests)}


def _comparisons(report, directory: Path) -> list[Any]:
    """Each device against its baseline in ``directory``, in device order."""
    from bisect_smem.analysis.baseline import compare_device

    return [compare_device(directory, dev) for dev in report.devices]


def _compare_code(comparisons: list[Any] | None, allow_missing: bool) -> int | None:
    """The exit code the comparisons call for: 2 for a missing baseline (unless allowed), else 1 for any
    regression, else 0; None without --compare."""
    if comparisons is None:
        return None
    if any(c.baseline is None for c in comparisons) and not allow_missing:
        return EXIT_USAGE
    return EXIT_MISMATCH if any(c.regressions for c in comparisons) else EXIT_OK


def _compare(report, comparisons: list[Any], allow_missing: bool, quiet_stdout: bool) -> None:
    """Print each device's comparison with its baseline."""
    from tabulate import tabulate

    out = sys.stderr if quiet_stdout else sys.stdout
    for dev, result in zip(report.devices, comparisons, strict=True):
        if result.baseline is None:
            print(f"device {dev.index}: {result.note}", file=out)
            if not allow_missing:
                print(f"error: {result.note} (use --allow-missing to accept)", file=sys.stderr)
            continue
        print(f"device {dev.index}: {result.note}: {result.compared} quantities, "
              f"{len(result.regressions)} regressed", file=out)
        if result.regressions:
            rows = [(dev.index, *line.split(": ", 1)) for line in result.regressions]
            print(tabulate(rows, headers=("device", "quantity", "baseline -> now"), disable_numparse=True), file=out)


class _ProgressPrinter:
    """One status line for all devices, redrawn a few times a second at most. A device silent for more
    than a second shows how long its current probe has been running, so a hang is visible as one.
    Without a capable terminal (TERM=dumb) the line is cleared with spaces, not ESC[K."""

    def __init__(self, stream: TextIO, interval_s: float = 0.25) -> None:
        self.stream, self.interval_s = stream, interval_s
        self.fancy = os.environ.get("TERM", "") not in ("", "dumb")
        self.state: dict[int, tuple[str, float]] = {}
        self.width = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def __call__(self, index: int, text: str) -> None:
        with self.lock:
            self.state[index] = (text, time.monotonic())

    def line(self, now: float) -> str:
        """The status line as it reads at ``now``."""
        parts = []
        for index, (text, since) in sorted(self.state.items()):
            running = now - since
            parts.append(f"device {index}: {text}" + (f" (running {running:.0f} s)" if running >= 1 else ""))
        return " | ".join(parts)[:200]

    def _tick(self) -> None:
        while not self.stopped.wait(self.interval_s):
            with self.lock:
                self._draw(self.line(time.monotonic()))

    def _draw(self, text: str) -> None:
        try:
            if self.fancy:
                print(f"\r\033[K{text}", end="", file=self.stream, flush=True)
            else:
                print(f"\r{text.ljust(self.width)}", end="", file=self.stream, flush=True)
            self.width = max(self.width, len(text))
        except (OSError, ValueError):
            self.stopped.set()

    def close(self) -> None:
        """Stop redrawing and leave the line empty."""
        self.stopped.set()
        self.ticker.join(timeout=1)
        with self.lock:
            self._draw("")
            try:
                print("\r", end="", file=self.stream, flush=True)
            except (OSError, ValueError):
                pass
