"""Which NVRTC this environment gives the tool, and from where: ``python -m bisect_smem.app.run.nvrtc_origin``
prints one JSON object and exits 0 when the probe module compiled, else 1. No GPU is needed.

It asks cuda-pathfinder (the lookup cuda-bindings and CuPy 14 both use: NVIDIA's wheels in
site-packages first, then conda, then the system), compiles the probe module for sm_90 through
cuda-bindings as a measurement does, and reads /proc/self/maps for the libnvrtc actually loaded. On a
node with only the driver, ``found_via`` must be ``site-packages`` and every mapped path inside this
environment.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from bisect_smem.devices import nvrtc
from bisect_smem.devices.kernel_abi import NVRTC_OPTIONS, module_name_expressions, module_source
from bisect_smem.experiments.config import DEFAULT_STATIC_SIZES


def mapped_nvrtc() -> list[str]:
    """The libnvrtc files mapped into this process (empty where /proc cannot be read)."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "libnvrtc" in line and "/" in line})
    except OSError:
        return []


def origin(arch: str = "sm_90") -> dict[str, Any]:
    """What the lookup found, what compiling the probe module loaded, and the CUDA variables that could
    point elsewhere."""
    # Deferred: cuda-pathfinder comes with cuda-bindings, an extra; only this diagnosis asks where NVRTC is.
    from cuda.pathfinder import load_nvidia_dynamic_lib

    found = load_nvidia_dynamic_lib("nvrtc")
    built = nvrtc.compile_source(module_source(), arch, module_name_expressions(DEFAULT_STATIC_SIZES),
                                 NVRTC_OPTIONS, cubin=True)
    return {"found_via": found.found_via, "abs_path": found.abs_path, "mapped": mapped_nvrtc(),
            "nvrtc_version": nvrtc.nvrtc_version(), "arch": arch, "compiled": built.ok,
            "cubin_bytes": len(built.image), "log": built.log[-500:], "prefix": sys.prefix,
            "environment": {k: os.environ.get(k) for k in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH")}}


if __name__ == "__main__":
    result = origin(sys.argv[1] if len(sys.argv) > 1 else "sm_90")
    print(json.dumps(result, indent=2, sort_keys=True))
    sys.exit(0 if result["compiled"] else 1)
