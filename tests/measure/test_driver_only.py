"""A node with only the driver: `pip install '.[cuda13]'` into a clean virtual environment brings an NVRTC
that cuda-pathfinder (the lookup cuda-bindings and CuPy 14 use) finds in the wheels alone, with no
CUDA_PATH, CUDA_HOME or LD_LIBRARY_PATH and, where this runs as root, every /usr/local/cuda* folder
hidden by a private tmpfs; the probe module compiles with it, and CuPy loads the same library.

Downloads from the package index (marked `network`): cupy-cuda13x, cuda-bindings, cuda-pathfinder,
nvidia-cuda-nvrtc, numpy, tabulate, nvidia-ml-py and setuptools to build the project, about 250 MB
unless pip's cache has them. No GPU is needed.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

CUPY_NVRTC = """import json
from cupy.cuda import nvrtc
version = nvrtc.getVersion()
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnvrtc" in l and "/" in l})
print(json.dumps({"version": list(version), "mapped": maps}))
"""


def _hide_toolkits(command: list[str]) -> list[str]:
    """``command`` in a private mount namespace with a tmpfs over every /usr/local/cuda* folder, where
    this runs as root and unshare works; else as it is (the assertions still name what was loaded)."""
    folders = sorted({os.path.realpath(p) for p in glob.glob("/usr/local/cuda*") if os.path.isdir(p)})
    if os.geteuid() != 0 or shutil.which("unshare") is None or not folders:
        return command
    if subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode != 0:
        return command
    mounts = " && ".join(f"mount -t tmpfs none '{folder}'" for folder in folders)
    return ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]


@pytest.fixture(scope="module")
def driver_only_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtual environment with the project and its cuda13 extra, nothing else."""
    venv = tmp_path_factory.mktemp("driver-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                                f"{ROOT}[cuda13]"], capture_output=True, text=True, timeout=1200)
    if installed.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"pip install '.[cuda13]' failed on CI: {installed.stderr[-2000:]}")
        pytest.skip(f"pip install '.[cuda13]' failed (no package index here?): {installed.stderr[-300:]}")
    return venv


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(_hide_toolkits([str(venv / "bin" / "python"), *args]), capture_output=True, text=True,
                          timeout=300, env=clean, cwd=venv.parent)


@pytest.mark.network
def test_the_cuda13_extra_brings_an_nvrtc_found_in_the_wheels(driver_only_env: Path) -> None:
    done = _run(driver_only_env, "-m", "bisect_smem.app.run.nvrtc_origin", "sm_90")
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    site = str(driver_only_env)
    assert found["found_via"] == "site-packages" and found["abs_path"].startswith(site), found
    assert found["mapped"] and all(path.startswith(site) for path in found["mapped"]), found
    assert found["compiled"] and found["cubin_bytes"] > 0 and found["prefix"] == site
    assert found["environment"] == {"CUDA_PATH": None, "CUDA_HOME": None, "LD_LIBRARY_PATH": None}


@pytest.mark.network
def test_cupy_loads_the_same_nvrtc(driver_only_env: Path) -> None:
    done = _run(driver_only_env, "-c", CUPY_NVRTC)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded["version"][0] == 13
    assert loaded["mapped"] and all(path.startswith(str(driver_only_env)) for path in loaded["mapped"]), loaded
