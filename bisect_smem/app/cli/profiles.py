"""``profiles``: the published per-architecture table the simulator and the reference rows use, as a
table that fits the terminal or as JSON (``--json``)."""

from __future__ import annotations

import argparse

from bisect_smem.app.cli import json_option
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs.terminal import text_width
from bisect_smem.app.render import profiles
from bisect_smem.core.errors import ExitCode
from bisect_smem.core.profiles import PROFILES

WHAT = "the profiles"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``profiles`` subcommand, under the tool's subcommands ``sub``."""
    parser = sub.add_parser("profiles", help=SUBCOMMANDS["profiles"],
                            epilog="exit codes: 0 printed; 2 bad usage or the JSON could not be written")
    json_option.add(parser, WHAT)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The table (or its JSON) and exit code 0."""
    path = json_option.checked(args.json, WHAT)
    return json_option.shown(args.json, path, profiles.render_json(PROFILES), profiles.render(PROFILES, text_width()),
                             WHAT), ExitCode.OK
