"""What a shell should offer for each argument of the parser, added to a parser made for the completion
generator only (the tool's own parser validates these values itself and keeps its own messages).

An argument is a file where its metavar names one (``PATH``, ``FILE``, ``REPORT.json``) and a folder where
its metavar is ``DIR``; shtab turns these into its file and directory completions. Arguments whose values
come from a table the tool reads (backends, simulated profiles, operand types, warps) offer that table.
``--simulate`` also takes a saved report, so it offers JSON files too; the command after ``trace --`` is
completed as the shell completes a command line of its own (names, then that command's arguments).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

FILE_WORDS = ("PATH", "FILE", ".json")
DIR_WORD = "DIR"


def offered() -> dict[str, list[str]]:
    """The values each option offers, by option string, read from where the tool declares them."""
    from bisect_smem.analysis.fit.cutlass.types import ALIASES, OPERANDS, OUTPUT_BITS
    from bisect_smem.analysis.fit.triton import WARPS
    from bisect_smem.analysis.fit.triton.matmul import DTYPES as TRITON_DTYPES
    from bisect_smem.app.run.requests import ALL_BACKENDS
    from bisect_smem.core.profiles import profile_names
    from bisect_smem.devices.backends.table import BACKENDS

    operands = sorted({*OPERANDS, *ALIASES, *TRITON_DTYPES})
    return {"--backend": [*BACKENDS, ALL_BACKENDS], "--simulate": profile_names(), "--arch": profile_names(),
            "--dtype": operands, "--dtype-a": operands, "--dtype-b": operands, "--c-dtype": sorted(OUTPUT_BITS),
            "--d-dtype": sorted(set(OUTPUT_BITS) - {"void"}), "--warps": [str(w) for w in WARPS]}


# The words after trace's "--" are a command line of their own. bash: bash-completion's _command_offset
# completes it as if typed alone (the command's own completion); without bash-completion, command names, then
# files. shtab calls the function in a subshell with the word being completed; COMP_WORDS is the whole line.
BASH_COMMAND = "_shtab_bisect_smem_compgen_command"
BASH_COMMAND_PREAMBLE = f"""
{BASH_COMMAND}() {{
  local start=1
  while (( start < COMP_CWORD )) && [[ ${{COMP_WORDS[start]}} != -- ]]; do (( start++ )); done
  if (( start == COMP_CWORD || start + 1 == COMP_CWORD )); then compgen -c -- "$1" | sort -u
  elif declare -F _command_offset >/dev/null; then
    _command_offset $(( start + 1 )) 2>/dev/null; printf '%s\\n' "${{COMPREPLY[@]}}"
  else compgen -f -- "$1"
  fi
}}
"""
# zsh: _normal completes the words from the command on (as for sudo or nice); the "--" itself is not one.
ZSH_COMMAND = "_bisect_smem_traced_command"
ZSH_COMMAND_PREAMBLE = f"""
{ZSH_COMMAND}() {{
  if [[ $words[1] == -- ]]; then shift words; (( CURRENT-- )); fi
  _normal
}}
"""
ZSH_PROFILE_OR_REPORT = "_bisect_smem_profile_or_report"
# bash: shtab marks a function whose name says "_file" as completing file names (a folder gets its "/").
BASH_PROFILE_OR_REPORT = "_shtab_bisect_smem_compgen_profile_or_json_files"


def _bash_profile_or_report(profiles: list[str]) -> str:
    """A bash function printing the profile names, folders and JSON files that start with the word."""
    return (f"\n{BASH_PROFILE_OR_REPORT}() {{\n  compgen -W \"{' '.join(profiles)}\" -- \"$1\"\n"
            f"  compgen -d -- \"$1\"\n  compgen -f -X '!*.json' -- \"$1\"\n}}\n")


def _zsh_profile_or_report(profiles: list[str]) -> str:
    """A zsh function offering the profile names and the JSON reports (--simulate takes either)."""
    return (f"\n{ZSH_PROFILE_OR_REPORT}() {{\n  _alternative 'profiles:profile:({' '.join(profiles)})' "
            f"'reports:report:_files -g \"*.json\"'\n}}\n")


def preamble(shell: str) -> str:
    """The functions the completions named in ``tag`` call, defined once at the top of ``shell``'s script."""
    if shell == "zsh":
        return ZSH_COMMAND_PREAMBLE + _zsh_profile_or_report(offered()["--simulate"])
    return BASH_COMMAND_PREAMBLE + _bash_profile_or_report(offered()["--simulate"])


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _actions(sub)


def tag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with a completion on every argument that takes a path or a value from a table."""
    import shtab

    values = offered()
    for action in _actions(parser):
        named = [o for o in action.option_strings if o in values]
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        if "--simulate" in action.option_strings:
            action.choices = values["--simulate"]
            action.complete = {"bash": BASH_PROFILE_OR_REPORT, "zsh": ZSH_PROFILE_OR_REPORT}  # type: ignore[attr-defined]
        elif not action.option_strings and action.nargs == argparse.REMAINDER:
            action.complete = {"bash": BASH_COMMAND, "zsh": ZSH_COMMAND}  # type: ignore[attr-defined]
        elif named and action.choices is None:
            action.choices = values[named[0]]
        elif metavar == DIR_WORD or metavar.endswith(f" {DIR_WORD}"):
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif any(word in metavar for word in FILE_WORDS):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
    return parser
