"""What a shell should offer for each argument of the parser, added to a parser made for the completion
generator only (the tool's own parser validates these values itself and keeps its own messages).

An argument is a file where its metavar names one (``PATH``, ``FILE``, ``REPORT.json``) and a folder where
its metavar is ``DIR``; shtab turns these into its file and directory completions. Arguments whose values
come from a table the tool reads (backends, simulated profiles, operand types, warps) offer that table.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

FILE_WORDS = ("PATH", "FILE", ".json")
DIR_WORD = "DIR"


def offered() -> dict[str, list[str]]:
    """The values each option offers, by option string, read from where the tool declares them."""
    from bisect_smem.analysis.fit.cutlass.types import ALIASES, OPERANDS, OUTPUT_BITS
    from bisect_smem.analysis.fit.triton.matmul import DTYPES as TRITON_DTYPES
    from bisect_smem.analysis.fit.triton.rule import WARPS
    from bisect_smem.app.run.requests import ALL_BACKENDS
    from bisect_smem.core.profiles import profile_names
    from bisect_smem.devices.backends import BACKEND_NAMES

    operands = sorted({*OPERANDS, *ALIASES, *TRITON_DTYPES})
    return {"--backend": [*BACKEND_NAMES, ALL_BACKENDS], "--simulate": profile_names(), "--arch": profile_names(),
            "--dtype": operands, "--dtype-a": operands, "--dtype-b": operands, "--c-dtype": sorted(OUTPUT_BITS),
            "--d-dtype": sorted(set(OUTPUT_BITS) - {"void"}), "--warps": [str(w) for w in WARPS]}


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
        if named and action.choices is None:
            action.choices = values[named[0]]
        elif metavar == DIR_WORD or metavar.endswith(f" {DIR_WORD}"):
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif any(word in metavar for word in FILE_WORDS):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
    return parser
