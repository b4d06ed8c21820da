"""Where a CUDA toolkit is installed: the folders that ptxas and libcupti are looked for in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SYSTEM_CUDA = "/usr/local/cuda"  # where NVIDIA's installers put the toolkit


def toolkit_homes(environ: Mapping[str, str] | None = None) -> list[Path]:
    """$CUDA_HOME, then $CUDA_PATH (where set), then /usr/local/cuda."""
    env = os.environ if environ is None else environ
    return [Path(home) for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), SYSTEM_CUDA) if home]
