"""``profiles``: the published per-architecture table the simulator and the reference rows use."""

from __future__ import annotations

import argparse

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.render import text
from bisect_smem.core.errors import ExitCode
from bisect_smem.core.profiles import PROFILES


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``profiles`` subcommand, under the tool's subcommands ``sub``."""
    sub.add_parser("profiles", help=SUBCOMMANDS["profiles"])


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The table (it takes no options)."""
    return text.profiles(PROFILES), ExitCode.OK
