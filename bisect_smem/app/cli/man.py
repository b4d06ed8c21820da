"""The ``man`` subcommand: print the man page (roff) shipped in the package."""

from __future__ import annotations

import argparse

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.core.errors import ExitCode
from bisect_smem.share import text

HELP = SUBCOMMANDS["man"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``bisect-smem man``."""
    sub.add_parser("man", help=HELP, epilog=(
        "pip installs the page beside the command (PREFIX/share/man/man1), where man finds it. For one user: "
        "mkdir -p ~/.local/share/man/man1 && bisect-smem man > ~/.local/share/man/man1/bisect-smem.1. "
        "exit codes: 0 printed; 2 bad usage"))


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The man page's text and exit code 0."""
    return text("man"), ExitCode.OK
