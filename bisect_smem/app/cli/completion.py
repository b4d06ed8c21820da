"""The ``completion`` subcommand: print the shell completion shipped in the package, for bash or zsh."""

from __future__ import annotations

import argparse

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.core.errors import ExitCode
from bisect_smem.share import text

HELP = SUBCOMMANDS["completion"]
SHELLS = ("bash", "zsh")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``bisect-smem completion bash|zsh``."""
    completion = sub.add_parser("completion", help=HELP, epilog=(
        "bash: mkdir -p ~/.local/share/bash-completion/completions && bisect-smem completion bash > "
        "~/.local/share/bash-completion/completions/bisect-smem; zsh: mkdir -p ~/.zfunc && bisect-smem completion "
        "zsh > ~/.zfunc/_bisect-smem, with fpath=(~/.zfunc $fpath) before compinit. "
        "exit codes: 0 printed; 2 bad usage"))
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete for")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The completion script's text and exit code 0."""
    return text(args.shell), ExitCode.OK
