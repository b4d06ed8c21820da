"""Kernel names made readable for the explanation of a trace: the system's C++ demangler (c++filt, binutils),
all names in one call. Where there is none, a name stays as the driver gave it (mangled), which is still
exact."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable

DEMANGLE_TIMEOUT_S = 30


def demangler() -> str | None:
    """The c++filt on PATH, or None."""
    return shutil.which("c++filt") or shutil.which("llvm-cxxfilt")


def demangle_all(names: Iterable[str]) -> dict[str, str]:
    """Each mangled name and its readable form (itself where it cannot be demangled)."""
    wanted = sorted({n for n in names if n and "\n" not in n})
    tool = demangler()
    if not wanted or tool is None:
        return {n: n for n in wanted}
    # GNU c++filt stops at a nesting depth that CUTLASS's kernel names exceed, leaving them mangled, unless
    # told not to; llvm-cxxfilt has no such limit and no such option.
    for options in (["--no-recurse-limit"], []):
        try:
            done = subprocess.run([tool, *options], input="\n".join(wanted) + "\n", capture_output=True, text=True,
                                  timeout=DEMANGLE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            break
        lines = done.stdout.split("\n")
        if done.returncode == 0 and len(lines) >= len(wanted):
            return dict(zip(wanted, lines[:len(wanted)], strict=True))
    return {n: n for n in wanted}
