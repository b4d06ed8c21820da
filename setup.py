"""The one thing pyproject.toml cannot say: a wheel for one platform, with the collector prebuilt for it.

``BISECT_SMEM_WHEEL_MACHINE=x86_64`` (or aarch64; ``make wheel`` sets it, after tools/prebuilt_collector.py
built the library) ships bisect_smem/devices/collector/prebuilt/MACHINE/ and tags the wheel
py3-none-manylinux2014_MACHINE: the Python code stays pure, the one native file is built for glibc 2.17.
Unset, no prebuilt library is shipped and the wheel is py3-none-any (the collector is then built with cc at
first use).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools 70.1 and later
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

MACHINE = os.environ.get("BISECT_SMEM_WHEEL_MACHINE", "")
COLLECTOR = "bisect_smem.devices.collector"
PREBUILT = Path("bisect_smem", "devices", "collector", "prebuilt")


class BuildPyForOneMachine(build_py):
    """Package data without the prebuilt libraries of other machines."""

    def run(self) -> None:
        """Build, after refusing a machine with no library built and emptying what a build left."""
        if MACHINE and not any((PREBUILT / MACHINE).glob("collector-*.so")):
            raise SystemExit(f"error: no collector prebuilt for {MACHINE} in {PREBUILT / MACHINE}: "
                             f"run tools/prebuilt_collector.py {MACHINE} first")
        # build/lib outlives a build: a library another machine's wheel left there would be shipped too.
        shutil.rmtree(Path(self.build_lib, PREBUILT), ignore_errors=True)
        super().run()

    def find_data_files(self, package: str, src_dir: str) -> list[str]:
        """The package's data files, less the prebuilt libraries of other machines (all, where none is named)."""
        files = super().find_data_files(package, src_dir)
        if package != COLLECTOR:
            return files
        return [f for f in files if "prebuilt" not in Path(f).parts or Path(f).parent.name == MACHINE]


class BdistWheelForOneMachine(bdist_wheel):
    """Tagged py3-none-manylinux2014_MACHINE where a machine is named."""

    def finalize_options(self) -> None:
        """The platform tag, set before bdist_wheel reads it."""
        if MACHINE:
            self.plat_name = f"manylinux2014_{MACHINE}"
        super().finalize_options()


setup(cmdclass={"build_py": BuildPyForOneMachine, "bdist_wheel": BdistWheelForOneMachine})
