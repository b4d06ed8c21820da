"""The subcommands, declared once: each name with the one line ``--help`` lists for it, in that order.

A subcommand NAME is the module ``bisect_smem.app.cli.NAME`` with ``add_parser(sub)`` (its options, under
``help=SUBCOMMANDS[NAME]``) and ``run(args) -> (text, exit code)``. A module is imported only when the
command line names it (``load``), so ``--help`` lists every subcommand from this table alone and ``check``
loads only what ``check`` uses; a new subcommand is its module and one line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Each line fits beside its name in an 80-column --help (24 columns of name): 54 characters at most.
SUBCOMMANDS: dict[str, str] = {
    "profiles": "list the published per-architecture profiles",
    "merge": "one table from many hosts' JSON reports",
    "fit": "would a kernel's shared memory fit? per architecture",
    "trace": "run a command, explain its shared-memory requests",
    "check": "one line from the last report, for node-health agents",
    "export": "a report as Prometheus metrics or NFD labels",
    "schema": "print the JSON Schema of an output (report, fit, ...)",
    "completion": "print the shell completion for bash or zsh",
    "man": "print the man page (roff)",
}

# Modules that stand in for a subcommand's own (tests register one here); else the module of that name.
OVERRIDES: dict[str, ModuleType] = {}


def load(name: str) -> ModuleType:
    """The module of subcommand ``name``, imported now."""
    return OVERRIDES.get(name) or importlib.import_module(f"bisect_smem.app.cli.{name}")


def named_in(argv: list[str]) -> list[str]:
    """The subcommands whose parsers must be whole for ``argv``: each name up to the first that no option
    word stands before, which is the subcommand; the words after it are its own (``schema trace`` needs
    only schema). A name right after an option may be that option's value (``--json check``): it costs only
    the import of that subcommand's module, and the search goes on."""
    named = []
    for i, word in enumerate(argv):
        if word in SUBCOMMANDS:
            named.append(word)
            if i == 0 or not argv[i - 1].startswith("-"):
                break
    return named
