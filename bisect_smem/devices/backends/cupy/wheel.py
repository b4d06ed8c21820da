"""Which CuPy wheel is installed, and whether this driver can run it, found without importing CuPy (which
costs about a second): a driver older than the wheel's CUDA major fails at the first launch, so it is
refused before measuring, with the extra to install instead."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from bisect_smem.core.errors import BackendUnavailable

INSTALL_HINT = "install CuPy for your driver: pip install cupy-cuda13x (cupy-cuda12x for CUDA 12), or the cuda13 extra"


def cupy_cuda_major(search_path: Sequence[str] | None = None) -> int | None:
    """The CUDA major version the installed CuPy wheel was built for, from its ``cupy_cudaNNx-*.dist-info``
    folder on the import path (no import, and no scan of every installed package's metadata, which
    takes a fifth of a second on a well-stocked image)."""
    for entry in sys.path if search_path is None else search_path:
        folder = Path(entry or ".")
        if not folder.is_dir():
            continue
        for info in folder.glob("cupy_cuda*.dist-info"):
            found = re.match(r"cupy_cuda(\d\d)", info.name.lower())
            if found:
                return int(found.group(1))
    return None


def check_driver_for_cupy(driver_version: int, cupy_major: int | None) -> None:
    """A driver older than CuPy's CUDA major fails at the first launch: say so before measuring."""
    if cupy_major is None or driver_version <= 0:
        return
    if driver_version // 1000 < cupy_major:
        raise BackendUnavailable(
            f"the driver supports CUDA {driver_version // 1000}.{driver_version % 1000 // 10}, but CuPy was built "
            f"for CUDA {cupy_major}: update the driver or install the cuda{driver_version // 1000} extra (cupy-cuda{driver_version // 1000}x)")
