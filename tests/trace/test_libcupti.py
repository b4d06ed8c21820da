"""libcupti is chosen for the driver's CUDA version: asked of fake drivers (cuDriverGetVersion 12020, 12080,
13000) or read from /proc/driver/nvidia/version texts; found in fake wheel folders (libcupti.so.12 and .13 with
their dist-info) of this tool's environment and of the traced command's own virtualenv; and said on stderr
before the command runs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bisect_smem.devices.collector import libcupti
from bisect_smem.devices.collector.libcupti import DriverCuda
from tests.conftest import one_error
from tests.trace.fakes import build_driver, need_cc

CU12, CU13 = "nvidia-cuda-cupti-cu12", "nvidia-cuda-cupti"


@pytest.fixture(autouse=True)
def _no_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No toolkit and no override: only the wheels a test makes are found."""
    monkeypatch.setattr(libcupti, "toolkit_homes", lambda _env: [])
    monkeypatch.setattr(libcupti, "SYSTEM_CUDA", str(tmp_path / "no-cuda"))
    monkeypatch.delenv(libcupti.OVERRIDE, raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def wheel(site: Path, fakes: Path, major: int, version: str) -> Path:
    """``site`` with the nvidia wheel of CUDA ``major`` installed as pip does it (libcupti.so.N, dist-info)."""
    sub, name = libcupti.WHEELS[major]
    (site / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy(fakes / f"libcupti.so.{major}", site / sub / f"libcupti.so.{major}")
    (site / f"{name.replace('-', '_')}-{version}.dist-info").mkdir()
    return site / sub / f"libcupti.so.{major}"


@pytest.fixture
def sites(tmp_path: Path, fakes: Path) -> tuple[list[str], Path, Path]:
    """Two site-packages: one with CUDA 13.0's wheel, one with CUDA 12.8's."""
    thirteen = wheel(tmp_path / "a", fakes, 13, "13.0.85")
    twelve = wheel(tmp_path / "b", fakes, 12, "12.8.90")
    return [str(tmp_path / "a"), str(tmp_path / "b")], twelve, thirteen


@pytest.mark.parametrize("reported, version", [(12020, (12, 2)), (12080, (12, 8)), (13000, (13, 0))])
def test_the_driver_says_its_cuda_version(tmp_path: Path, reported: int, version: tuple[int, int]) -> None:
    driver = libcupti.driver_cuda(str(build_driver(tmp_path, reported)), tmp_path / "absent")
    assert driver == DriverCuda(version, "cuDriverGetVersion")


@pytest.mark.parametrize("text, version, branch", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n", (12, 2), 535),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)\n",
     (12, 8), 570),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build\nGCC version: gcc 12\n",
     (13, 0), 580),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n", (12, 4), 550),
])
def test_without_libcuda_the_branch_in_proc_says_it(tmp_path: Path, text: str, version: tuple[int, int],
                                                    branch: int) -> None:
    (tmp_path / "version").write_text(text)
    assert libcupti.driver_cuda(str(tmp_path / "no-libcuda.so"), tmp_path / "version") == \
        DriverCuda(version, f"driver R{branch}")


def test_no_driver_at_all(tmp_path: Path) -> None:
    (tmp_path / "version").write_text("not a driver\n")
    assert libcupti.driver_cuda(str(tmp_path / "no-libcuda.so"), tmp_path / "version") is None
    assert libcupti.driver_cuda(str(tmp_path / "no-libcuda.so"), tmp_path / "absent") is None


@pytest.mark.parametrize("driver, chosen", [((12, 2), 12), ((12, 8), 12), ((13, 0), 13)])
def test_the_libcupti_of_the_driver_s_major_is_chosen(sites: tuple[list[str], Path, Path], driver: tuple[int, int],
                                                      chosen: int) -> None:
    search, twelve, thirteen = sites
    choice = libcupti.choose(search, {}, DriverCuda(driver, "cuDriverGetVersion"))
    assert choice.found is not None and choice.found.path == str(twelve if chosen == 12 else thirteen)
    if driver == (12, 8):
        assert choice.says == f"libcupti 12.8 from wheel {CU12} in {search[1]} (driver CUDA 12.8)"
    if driver == (12, 2):  # only a newer minor of its major: better than a CUDA 13 one, which cannot start
        assert choice.says.endswith("(driver CUDA 12.2): newer than the driver; where it cannot start, the summary "
                                    "names the processes left untraced")


def test_a_cuda_13_libcupti_alone_is_refused_on_a_cuda_12_driver(tmp_path: Path, fakes: Path) -> None:
    # Under R535-R570 it cannot start: every process would run untraced. The hint names the CUDA 12 wheel.
    thirteen = wheel(tmp_path / "a", fakes, 13, "13.0.85")
    choice = libcupti.choose([str(tmp_path / "a")], {}, DriverCuda((12, 4), "driver R550"))
    assert choice.found is None
    assert f"only libcupti 13.0 ({thirteen}), which needs a newer driver" in choice.says
    assert f'pip install "{CU12}<12.5"' in choice.says and "driver R550" in choice.says


def test_the_hint_names_the_wheel_of_the_driver(tmp_path: Path) -> None:
    assert f'pip install "{CU13}<13.1"' in libcupti.choose([], {}, DriverCuda((13, 0), "cuDriverGetVersion")).says
    assert f'pip install "{CU12}<12.9"' in libcupti.choose([], {}, DriverCuda((12, 8), "cuDriverGetVersion")).says


def test_the_user_s_choice_is_taken_and_said_to_need_a_newer_driver(sites: tuple[list[str], Path, Path]) -> None:
    search, _, thirteen = sites
    choice = libcupti.choose(search, {libcupti.OVERRIDE: str(thirteen)}, DriverCuda((12, 4), "driver R550"))
    assert choice.found is not None and choice.found.path == str(thirteen)
    assert choice.says.endswith("it needs a newer driver, so processes will run untraced")


def venv(tmp_path: Path, fakes: Path) -> tuple[Path, Path]:
    """A virtualenv as python -m venv lays it out, with CUDA 12.8's wheel; and a script whose #! names it."""
    root = tmp_path / "venv"
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    (root / "bin" / "python3").symlink_to(sys.executable)
    library = wheel(root / "lib" / "python3.11" / "site-packages", fakes, 12, "12.8.90")
    script = tmp_path / "serve"
    script.write_text(f"#!{root / 'bin' / 'python3'}\nimport os\nprint(os.environ['{libcupti.OVERRIDE}'])\n")
    script.chmod(0o755)
    return script, library


def test_the_command_s_own_virtualenv_is_looked_in(tmp_path: Path, fakes: Path) -> None:
    script, library = venv(tmp_path, fakes)
    site = str(library.parents[3])
    path = {"PATH": f"{tmp_path / 'venv' / 'bin'}{os.pathsep}/usr/bin"}
    assert libcupti.command_site_packages([str(script)], {}) == [site]  # the #! line
    assert libcupti.command_site_packages(["python3", "-m", "vllm"], path) == [site]  # on PATH, as written
    assert libcupti.command_site_packages(["sh", "-c", "x"], {"VIRTUAL_ENV": str(tmp_path / "venv")}) == [site]
    env_line = tmp_path / "tool"
    env_line.write_text("#!/usr/bin/env -S python3 -u\n")
    assert libcupti.command_site_packages([str(env_line)], path) == [site]  # #!/usr/bin/env, through PATH
    assert libcupti.command_site_packages(["sh", "-c", "x"], {}) == []


def test_trace_says_which_libcupti_before_the_command_runs(tmp_path: Path, fakes: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    need_cc()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    monkeypatch.setattr(libcupti, "DRIVER_LIBRARY", str(build_driver(tmp_path / "driver", 12080)))
    script, library = venv(tmp_path, fakes)
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", str(script)])
    out, err = capfd.readouterr()
    assert code == 0 and out.splitlines()[0] == str(library)  # what the command was given
    assert err.splitlines()[0] == (f"bisect-smem trace: libcupti 12.8 from wheel {CU12} in {library.parents[3]} "
                                   "(driver CUDA 12.8)")


def test_no_libcupti_for_the_driver_is_one_line_and_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import run_main

    monkeypatch.setattr(libcupti, "DRIVER_LIBRARY", str(tmp_path / "no-libcuda.so"))
    monkeypatch.setattr(libcupti, "DRIVER_VERSION_FILE", tmp_path / "version")
    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12\n")
    monkeypatch.setattr(sys, "path", [])
    code, _, err = run_main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "true"], capsys)
    assert code == 3 and f'pip install "{CU12}<12.3"' in one_error(err) and not (tmp_path / "t").exists()


def test_a_toolkit_s_libcupti_has_the_toolkit_s_version(tmp_path: Path, fakes: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "cuda-12.4"
    (home / "extras" / "CUPTI" / "lib64").mkdir(parents=True)
    shutil.copy(fakes / "libcupti.so.12", home / "extras" / "CUPTI" / "lib64" / "libcupti.so.12")
    (home / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}')
    thirteen = wheel(tmp_path / "a", fakes, 13, "13.0.85")
    monkeypatch.setattr(libcupti, "toolkit_homes", lambda _env: [home])
    choice = libcupti.choose([str(tmp_path / "a")], {}, DriverCuda((12, 4), "driver R550"))
    assert choice.says == f"libcupti 12.4 from toolkit {home} (driver CUDA 12.4)"
    assert libcupti.choose([str(tmp_path / "a")], {}, DriverCuda((13, 0), "driver R580")).found.path == str(thirteen)
