"""The shell completions and the man page, generated from the parser by tools/generate.py and shipped as
package data, so that an installed wheel can print them (``bisect-smem completion bash|zsh``,
``bisect-smem man``)."""

from __future__ import annotations

from importlib import resources

PACKAGE = "bisect_smem.share"
# What each shell's completion file is called, and the man page's, inside this package.
FILES = {"bash": "bisect-smem.bash", "zsh": "_bisect-smem", "man": "bisect-smem.1"}


def text(which: str) -> str:
    """The shipped text of ``which`` (a shell of FILES, or ``man``)."""
    return resources.files(PACKAGE).joinpath(FILES[which]).read_text(encoding="utf-8")
