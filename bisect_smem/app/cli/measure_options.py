"""The measuring command's options (the tool without a subcommand), on the tool's own parser.

Imported for every command line, ``--help`` and ``check`` included, so it imports only what declares an
option (levels, search bounds, format names); what the options do is ``measure.py``.
"""

from __future__ import annotations

import argparse

from bisect_smem.app import render
from bisect_smem.app.cli.argtypes import WEEK, Once, int_in, non_negative_int, positive_float
from bisect_smem.core.levels import DEFAULT_CONFIRM, DEFAULT_LEVEL, LEVELS, MAX_CONFIRM
from bisect_smem.core.status import NFD_DEFAULT_EXPIRY_S

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
    add("--json", action=Once, metavar="PATH", help="write the JSON report to PATH ('-' for stdout)")
    add("--format", choices=render.FORMATS, default="text",
        help="what stdout shows: text (default), markdown (GitHub tables, for a bug report) or json (the same as "
             "--json -)")
    add("--verbose", action="store_true", help="show every row instead of the compact table")
    add("--strict", action="store_true",
        help="exit 1 also when the device does better than a prediction or hint (`differs`)")
    add("--plot", action=Once, metavar="PATH", help="draw the residency staircase to PATH (.png or .svg; needs the plot extra)")
    add("--save-baseline", action=Once, metavar="DIR",
        help="save DIR/<gpu-model>/<driver>.json per GPU model (refuses to overwrite without --force)")
    add("--force", action="store_true", help="let --save-baseline replace an existing baseline")
    add("--compare", action=Once, metavar="DIR", help="compare with the saved baseline for each GPU model; exit 1 on any regression")
    add("--allow-missing", action="store_true", help="with --compare: a missing baseline is reported, not an error")
    add("--level", choices=LEVELS, default=DEFAULT_LEVEL,
        help=f"how much to measure (default {DEFAULT_LEVEL}): quick, the limits only (the default and opt-in "
             "ceilings, reserved bytes, granularity); standard, every measurement; full, standard plus the shared "
             "memory itself (every SM and byte, every granule, leftovers between processes)")
    add("--confirm", type=int_in(1, MAX_CONFIRM), default=DEFAULT_CONFIRM, metavar="N",
        help=f"times the ceiling and ceiling+1 are each seen, 1..{MAX_CONFIRM} (default {DEFAULT_CONFIRM})")
    add("--device-timeout", type=positive_float, default=None, metavar="S",
        help=f"give up on a device after S seconds (default 300; at most {WEEK})")
    add("--probe-timeout", type=positive_float, default=None, metavar="S",
        help=f"a probe that takes longer ends its worker and counts as a timeout (default 5; at most {WEEK})")
    add("--max-restarts", type=int_in(0, MAX_RESTARTS), default=6, metavar="N",
        help=f"restarts of a device's worker after faults before the device is given up, 0..{MAX_RESTARTS} "
             "(default 6)")
    add("--inject-fault", action="append", metavar="FAULT", help=argparse.SUPPRESS)  # test only
    add("--inline", action="store_true", help="measure in this process instead of one worker process per device")
    add("--quiet", action="store_true", help="no progress on stderr")
    _add_fleet_arguments(parser)


def _add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet outputs: --prom, --nfd, --nfd-expiry."""
    parser.add_argument("--prom", action=Once, metavar="PATH",
                        help="write Prometheus metrics for node_exporter's textfile collector to PATH (atomically)")
    parser.add_argument("--nfd", action=Once, metavar="PATH",
                        help="write a Node Feature Discovery feature file (features.d) to PATH (atomically)")
    parser.add_argument("--nfd-expiry", type=positive_float, metavar="S",
                        help=f"the feature file's labels expire S seconds after the run (default {NFD_DEFAULT_EXPIRY_S}; at most {WEEK})")
