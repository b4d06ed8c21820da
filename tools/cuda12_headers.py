"""Fetch CUDA 12's CUPTI and driver headers for the collector's ABI test (tests/trace/test_collector.py),
which checks every layout and id of cupti_abi.h against them as it does against the installed CUDA 13 toolkit.

    python tools/cuda12_headers.py DEST   # make cuda12-headers: DEST/include/{cuda_cupti,cuda_runtime,cuda_nvcc}

The headers come from NVIDIA's wheels, fetched with pip and unpacked here, headers only: installing the
nvidia-cuda-cupti-cu12 wheel would put a libcupti.so.12 where `trace` looks for one. cupti.h includes cuda.h
and cuda_runtime_api.h (nvidia-cuda-runtime-cu12), which include crt/host_defines.h (nvidia-cuda-nvcc-cu12).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The newest CUDA 12 release of each; the ids and layouts the collector uses are the same since CUDA 12.3.
WHEELS = ("nvidia-cuda-cupti-cu12==12.9.79", "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-nvcc-cu12==12.9.86")


def fetch(dest: Path) -> None:
    """Unpack the include folders of WHEELS into ``dest``/include/<package>; exits 2 when pip fails."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                               "--dest", folder, *WHEELS], check=False)
        if done.returncode != 0:
            print(f"error: pip could not download {', '.join(WHEELS)}", file=sys.stderr)
            sys.exit(2)
        for wheel in sorted(Path(folder).glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    parts = member.split("/")  # nvidia/<package>/include/...
                    if (len(parts) > 3 and parts[0] == "nvidia" and parts[2] == "include" and member.endswith(".h")
                            and ".." not in parts):
                        target = dest / "include" / parts[1] / "/".join(parts[3:])
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(archive.read(member))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tools/cuda12_headers.py DEST", file=sys.stderr)
        sys.exit(2)
    fetch(Path(sys.argv[1]))
