"""The fake libcupti and driver, built with cc, and a process that plays CUDA calls through them into the
collector (fake_process.py): what the trace tests run instead of a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def need_cc() -> str:
    """The C compiler, or skip: the collector and the fakes are C."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc): the collector and the fake libcupti cannot be built")
    return cc


def build_fakes(folder: Path, r535: bool = False) -> Path:
    """libfakecuda.so, libcupti.so.13 and libcupti.so.12 (the fake, with those sonames) in ``folder``; with
    ``r535`` the driver lacks cuFuncGetName and cuKernelGetName, as drivers before R545 do."""
    cc = need_cc()
    folder.mkdir(parents=True, exist_ok=True)
    source = str(HERE / "fake_cuda.c")
    # With libcuda's soname, a lookup of the loaded driver by name ("libcuda.so.1") finds the fake.
    driver = ["-DFAKE_DRIVER", *(["-DFAKE_R535"] if r535 else [])]
    subprocess.run([cc, "-shared", "-fPIC", *driver, "-Wl,-soname,libcuda.so.1", "-o",
                    str(folder / "libfakecuda.so"), source], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-DFAKE_CUPTI", "-Wl,-soname,libcupti.so.13", "-o",
                    str(folder / "libcupti.so.13"), source], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-DFAKE_CUPTI", "-Wl,-soname,libcupti.so.12", "-o",
                    str(folder / "libcupti.so.12"), source], check=True)
    return folder


def build_driver(folder: Path, cuda_version: int) -> Path:
    """A driver library whose cuDriverGetVersion says ``cuda_version`` (12080: CUDA 12.8), in ``folder``."""
    cc = need_cc()
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / f"libcuda-{cuda_version}.so"
    subprocess.run([cc, "-shared", "-fPIC", f"-DCUDA_VERSION={cuda_version}", "-o", str(library),
                    str(HERE / "fake_driver_version.c")], check=True)
    return library


def play(fakes: Path, collector: Path, out: Path, scenario: str = "all",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run fake_process.py: the collector records into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("FAKE_CUPTI_BUSY", "BISECT_SMEM_CUPTI_LIBRARY")}
    environ.update({"BISECT_SMEM_TRACE_DIR": str(out), **(env or {})})
    return subprocess.run([sys.executable, str(HERE / "fake_process.py"), str(fakes), str(collector), scenario],
                          env=environ, capture_output=True, text=True, timeout=60, check=False)


def lines(out: Path) -> list[dict[str, Any]]:
    """Every line the collector wrote into ``out``, as written (the record contract, before any reader)."""
    return [json.loads(line) for path in sorted(out.glob("*.jsonl")) for line in path.read_text().splitlines()]
