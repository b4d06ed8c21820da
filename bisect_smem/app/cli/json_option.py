"""``--json PATH`` for the commands that print a table or a line (merge, profiles, check), as fit and trace
have it: the document is delivered to PATH (outputs/delivery.py: atomically, the path checked before any
work), and with ``-`` it is printed on stdout instead of the text."""

from __future__ import annotations

import argparse
from pathlib import Path

from bisect_smem.app.cli.argtypes import Once
from bisect_smem.app.outputs import writer
from bisect_smem.app.outputs.delivery import Delivery


def add(parser: argparse.ArgumentParser, what: str) -> None:
    """The ``--json`` option of a command that writes ``what`` ("the merged fleet")."""
    parser.add_argument("--json", action=Once, metavar="PATH",
                        help=f"write {what} as JSON ('-' for stdout, instead of the text)")


def checked(given: str | None, what: str) -> Path | None:
    """The file ``--json`` names (None: not given, or ``-``), checked before any work is done."""
    return writer.output_path(given, what)


def shown(given: str | None, path: Path | None, document: str, text: str, what: str) -> str:
    """What goes to stdout: the document for ``--json -``, else ``text``; the document is written to
    ``path`` first, so that a stdout that fails never costs the file."""
    if path is not None:
        delivery = Delivery()
        delivery.file(path, what, document)
        delivery.write()
    return document if given == "-" else text
