"""The ``schema`` subcommand: print a published JSON Schema (one of schema_files.KINDS)."""

from __future__ import annotations

import argparse

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs.schema_files import KINDS, published
from bisect_smem.core.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``bisect-smem schema [KIND]``."""
    schema = sub.add_parser("schema", help=SUBCOMMANDS["schema"],
                            epilog="exit codes: 0 printed; 2 bad usage")
    schema.add_argument("kind", nargs="?", default="report", choices=KINDS,
                        help="which file's schema (default: report)")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The schema's text and exit code 0."""
    return published(args.kind), ExitCode.OK
