"""Build the collector the wheels ship: for each machine named (default: every one of
build.PREBUILT_MACHINES), with zig cc (the ``ziglang`` package) against glibc 2.17, into
bisect_smem/devices/collector/prebuilt/MACHINE/, named by the hash of its source. ``make wheel`` runs it.

    python tools/prebuilt_collector.py [x86_64] [aarch64]

Each library is checked before it is kept: no symbol it needs from the C library is newer than glibc 2.17
(``objdump -T``), or the manylinux2014 tag would be a lie that only shows on an old node.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bisect_smem.devices.collector import build  # noqa: E402


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def newest_glibc(library: Path) -> str:
    """The newest GLIBC_x.y version among the symbols ``library`` needs, read with objdump -T."""
    table = subprocess.run(["objdump", "-T", str(library)], capture_output=True, text=True, check=True).stdout
    versions = set(re.findall(r"\bGLIBC_([0-9]+(?:\.[0-9]+)+)\b", table))
    return max(versions, key=_version) if versions else "none"


def prebuild(machine: str) -> Path:
    """Build the collector for ``machine`` into its prebuilt folder (emptied first); its path."""
    target = build.prebuilt_path(machine)
    shutil.rmtree(target.parent, ignore_errors=True)
    target.parent.mkdir(parents=True)
    zig = [sys.executable, "-m", "ziglang", "cc", "-target", f"{machine}-linux-gnu.{build.PREBUILT_GLIBC}"]
    # -s: the symbols a loader needs stay; the debug info (with this machine's paths) goes.
    subprocess.run([*build.compile_command(zig, target), "-s"], check=True)
    target.chmod(build.LIBRARY_MODE)
    newest = newest_glibc(target)
    if newest == "none" or _version(newest) > _version(build.PREBUILT_GLIBC):
        target.unlink()
        raise SystemExit(f"error: {target} needs GLIBC_{newest}, newer than {build.PREBUILT_GLIBC}")
    return target


def main(argv: list[str]) -> int:
    """Build for each machine of ``argv`` (every one where empty); 2 for a machine with no wheel."""
    machines = argv or list(build.PREBUILT_MACHINES)
    unknown = sorted(set(machines) - set(build.PREBUILT_MACHINES))
    if unknown:
        print(f"error: no prebuilt collector for {', '.join(unknown)} (known: {', '.join(build.PREBUILT_MACHINES)})",
              file=sys.stderr)
        return 2
    for machine in machines:
        library = prebuild(machine)
        print(f"{library}: its newest C library symbol is GLIBC_{newest_glibc(library)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
