"""The manylinux wheel of this machine's platform, built by `make wheel-MACHINE` as a release is (zig cc,
glibc 2.17, no docker): tagged py3-none-manylinux2014_MACHINE, found manylinux2014-compatible by auditwheel,
shipping this machine's collector alone; installed into a fresh virtual environment (no package index), it
traces a program that is not Python, through the fake driver and libcupti, on a PATH without a C compiler.

Builds once per module into a temporary copy of the project (about 10 s; zig caches its C library stubs).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bisect_smem.devices.collector import build
from tests.conftest import consumer_tool
from tests.paths import ROOT
from tests.trace.fakes import build_fakes, need_cc

MACHINE = platform.machine()
LAUNCHER = ROOT / "tests" / "trace" / "fake_launcher.c"
# What a release build leaves out: the copy is the project as committed, plus what is not committed yet.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "build", "dist", "site", "__pycache__", "*.egg-info",
                                    ".pytest_cache", ".ruff_cache", ".hypothesis", "prebuilt")


@pytest.fixture(scope="module")
def make_wheel(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The wheel `make wheel-MACHINE` builds, for a machine of build.PREBUILT_MACHINES, each built once, in one
    copy of the project."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    work = tmp_path_factory.mktemp("wheel")
    project = work / "project"
    shutil.copytree(ROOT, project, ignore=NOT_COPIED)
    # Run from `make test`, this make must not take the outer one's flags; and the build asks no index.
    env = {**{k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
           "PIP_NO_INDEX": "1"}

    @functools.cache
    def made(machine: str) -> Path:
        dist = work / f"dist-{machine}"
        done = subprocess.run(["make", "-C", str(project), f"wheel-{machine}", f"PY={sys.executable}",
                               f"DIST={dist}"], env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        wheels = list(dist.glob("*.whl"))
        assert len(wheels) == 1, wheels
        return wheels[0]

    return made


@pytest.fixture(scope="module")
def wheel(make_wheel: Callable[[str], Path]) -> Path:
    """The wheel for this machine."""
    if MACHINE not in build.PREBUILT_MACHINES:
        pytest.skip(f"no manylinux wheel is made for {MACHINE} (only {', '.join(build.PREBUILT_MACHINES)})")
    return make_wheel(MACHINE)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its two dependencies (copied from this one: no index)."""
    import pynvml
    import tabulate

    venv = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # --ignore-installed, from another folder: the checkout's own egg-info (an editable install's) must not pass
    # for the wheel being installed already.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True, timeout=300, cwd=venv)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shutil.copytree(Path(tabulate.__file__).parent, site / "tabulate")
    shutil.copy(pynvml.__file__, site)
    return venv


def test_man_finds_the_page_of_the_installed_wheel(installed: Path) -> None:
    consumer_tool("man", "`make test` installs man-db as root")
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    done = subprocess.run(["man", "-w", "bisect-smem"], capture_output=True, text=True, timeout=30,
                          env={**env, "PATH": f"{installed / 'bin'}:/usr/bin:/bin"})
    assert done.stdout.strip() == str(installed / "share" / "man" / "man1" / "bisect-smem.1"), done.stderr


@pytest.mark.parametrize("machine", build.PREBUILT_MACHINES)
def test_the_wheel_is_tagged_for_its_platform_and_ships_its_collector_alone(make_wheel: Callable[[str], Path],
                                                                            machine: str) -> None:
    wheel = make_wheel(machine)
    tag = f"py3-none-manylinux2014_{machine}"
    assert wheel.name.endswith(f"-{tag}.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert f"Tag: {tag}" in meta.splitlines()
    native = [n for n in names if n.endswith(".so")]
    assert native == [_shipped(machine)]


@pytest.mark.parametrize("machine", build.PREBUILT_MACHINES)
def test_auditwheel_finds_it_manylinux2014(make_wheel: Callable[[str], Path], machine: str) -> None:
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(make_wheel(machine))],
                           capture_output=True, text=True, check=True).stdout
    tags = re.findall(r'"manylinux_2_([0-9]+)_' + machine + '"', " ".join(shown.split()))
    assert tags and int(tags[0]) <= 17, shown


@pytest.mark.parametrize("machine", build.PREBUILT_MACHINES)
def test_the_collector_needs_no_glibc_newer_than_2_17(make_wheel: Callable[[str], Path], machine: str,
                                                      tmp_path: Path) -> None:
    if shutil.which("objdump") is None:
        pytest.skip("no objdump")
    library = _extract(make_wheel(machine), machine, tmp_path)
    table = subprocess.run(["objdump", "-T", str(library)], capture_output=True, text=True, check=True).stdout
    versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(r"\bGLIBC_([0-9.]+[0-9])\b", table)}
    assert versions and max(versions) <= (2, 17), sorted(versions)


def _shipped(machine: str) -> str:
    return f"bisect_smem/devices/collector/prebuilt/{machine}/{build.library_name()}"


def _extract(wheel: Path, machine: str, folder: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        return Path(archive.extract(_shipped(machine), folder))


def test_a_program_that_is_not_python_is_traced_from_the_wheel_without_a_compiler(installed: Path,
                                                                                   tmp_path: Path) -> None:
    cc = need_cc()  # for the fakes and the program; the traced run has none
    fakes = build_fakes(tmp_path / "fakes")
    launcher = tmp_path / "fake_launcher"
    subprocess.run([cc, "-o", str(launcher), str(LAUNCHER), "-ldl"], check=True)
    script = tmp_path / "serve.sh"  # a shell script, as srun and mpirun start: not Python
    script.write_text(f'#!/bin/sh\necho "injected $CUDA_INJECTION64_PATH"\n{launcher} {fakes} || exit $?\nexit 7\n')
    script.chmod(0o755)
    path = str(installed / "bin")
    assert not any(shutil.which(name, path=path) for name in ("cc", "gcc", "clang"))
    env = {"PATH": path, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "BISECT_SMEM_CUPTI_LIBRARY": str(fakes / "libcupti.so.13")}
    out = tmp_path / "trace"
    done = subprocess.run(["bisect-smem", "trace", "--no-measure", "--out", str(out), "--", str(script)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 7, done.stdout + done.stderr
    injected = Path(done.stdout.splitlines()[0].removeprefix("injected "))
    assert injected.is_relative_to(installed) and injected.name == build.library_name(), injected
    assert injected.parent.name == MACHINE and not (tmp_path / "cache").exists()
    records = [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]
    refused = [r for r in records if r.get("event") == "attribute" and r.get("result") != 0]
    assert [(r["api"], r["value"], r.get("name")) for r in refused] == [("cuFuncSetAttribute", 232449, "_Z6kernelPf")]


# Debian's names for the C library of each machine, run by qemu-user from /usr/MACHINE-linux-gnu.
CROSS_LIBC = {"x86_64": "libc6-amd64-cross", "aarch64": "libc6-arm64-cross"}


@pytest.mark.parametrize("machine", [m for m in build.PREBUILT_MACHINES if m != MACHINE])
def test_the_collector_of_another_platform_records_under_qemu(make_wheel: Callable[[str], Path], machine: str,
                                                              tmp_path: Path) -> None:
    # The same program, fakes and refused call as above, all built by zig for that machine and run by qemu
    # with that machine's glibc: the library of a wheel this machine cannot run otherwise loads and records.
    qemu, sysroot = shutil.which(f"qemu-{machine}"), Path(f"/usr/{machine}-linux-gnu")
    if qemu is None or not (sysroot / "lib").is_dir():
        pytest.skip(f"no qemu-{machine} with {sysroot} (Debian: qemu-user and {CROSS_LIBC[machine]}; make tool-deps)")
    library = _extract(make_wheel(machine), machine, tmp_path)
    zig = [sys.executable, "-m", "ziglang", "cc", "-target", f"{machine}-linux-gnu.{build.PREBUILT_GLIBC}"]
    fakes, source = tmp_path / "fakes", str(ROOT / "tests" / "trace" / "fake_cuda.c")
    fakes.mkdir()
    # As tests/trace/fakes.py builds them with cc: the driver and libcupti, each with its soname.
    subprocess.run([*zig, "-shared", "-fPIC", "-DFAKE_DRIVER", "-Wl,-soname,libcuda.so.1", "-o",
                    str(fakes / "libfakecuda.so"), source], check=True, timeout=300)
    subprocess.run([*zig, "-shared", "-fPIC", "-DFAKE_CUPTI", "-Wl,-soname,libcupti.so.13", "-o",
                    str(fakes / "libcupti.so.13"), source], check=True, timeout=300)
    subprocess.run([*zig, "-o", str(tmp_path / "fake_launcher"), str(LAUNCHER), "-ldl"], check=True, timeout=300)
    out = tmp_path / "trace"
    out.mkdir()
    env = {"CUDA_INJECTION64_PATH": str(library), "BISECT_SMEM_TRACE_DIR": str(out),
           "BISECT_SMEM_CUPTI_LIBRARY": str(fakes / "libcupti.so.13"), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run([qemu, "-L", str(sysroot), str(tmp_path / "fake_launcher"), str(fakes)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]
    refused = [r for r in records if r.get("event") == "attribute" and r.get("result") != 0]
    assert [(r["api"], r["value"], r.get("name")) for r in refused] == [("cuFuncSetAttribute", 232449, "_Z6kernelPf")]
