"""Which collector is injected: the one shipped for this machine while it was built from the source beside it,
else the cached build, and only ever a file of this user's that nobody else can write. A planted file (writable
by all, another user's, a link) is refused and rebuilt; a cache folder others can write is not used at all."""

from __future__ import annotations

import os
import platform
import shutil
import stat
from pathlib import Path

import pytest

from bisect_smem.devices.collector import build
from tests.trace.fakes import need_cc

PLANTED = b"\x7fELF not the collector"
OTHER_UID = 54321


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty prebuilt folder in place of the package's (a checkout may hold libraries built by make wheel)."""
    folder = tmp_path / "prebuilt"
    folder.mkdir()
    monkeypatch.setattr(build, "PREBUILT_DIR", folder)
    return folder


@pytest.fixture
def cache(tmp_path: Path, shipped: Path) -> dict[str, str]:
    """An environment whose cache folder is under tmp_path, not yet made."""
    need_cc()
    return {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PATH": os.environ.get("PATH", "")}


def _is_a_fresh_build(library: Path) -> bool:
    status = os.lstat(library)
    return (stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid() and stat.S_IMODE(status.st_mode) == 0o755
            and library.read_bytes().startswith(b"\x7fELF") and library.read_bytes() != PLANTED)


def test_the_cache_folder_is_made_private(cache: dict[str, str]) -> None:
    library = build.collector_library(cache)
    assert library.parent == build.cache_dir(cache) and _is_a_fresh_build(library)
    assert stat.S_IMODE(library.parent.stat().st_mode) == 0o700


def _writable_by_all(library: Path) -> None:
    library.chmod(0o666)


def _a_link_to_a_file_of_ours(library: Path) -> None:
    elsewhere = library.with_name("elsewhere.so")
    elsewhere.write_bytes(PLANTED)
    elsewhere.chmod(0o755)
    library.unlink()
    library.symlink_to(elsewhere)


def _owned_by_another_user(library: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    library.chmod(0o755)
    os.chown(library, OTHER_UID, OTHER_UID)


@pytest.mark.parametrize("plant", [_writable_by_all, _a_link_to_a_file_of_ours, _owned_by_another_user],
                         ids=["mode-0666", "symlink", "another-uid"])
def test_a_planted_library_in_the_cache_is_refused_and_rebuilt(cache: dict[str, str], plant: object) -> None:
    folder = build.cache_dir(cache)
    folder.mkdir(mode=0o700, parents=True)
    target = folder / build.library_name()
    target.write_bytes(PLANTED)
    plant(target)  # type: ignore[operator]
    library = build.collector_library(cache)
    assert library == target and _is_a_fresh_build(library)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777], ids=["group-writable", "other-writable", "world-writable"])
def test_a_cache_folder_others_can_write_is_not_used(cache: dict[str, str], mode: int) -> None:
    folder = build.cache_dir(cache)
    folder.mkdir(parents=True)
    folder.chmod(mode)
    planted = folder / build.library_name()
    planted.write_bytes(PLANTED)
    planted.chmod(0o755)  # a good mode: the folder is what betrays it
    library = build.collector_library(cache)
    assert library.parent != folder and _is_a_fresh_build(library)
    assert stat.S_IMODE(library.parent.stat().st_mode) == 0o700 and library.parent.stat().st_uid == os.geteuid()
    assert planted.read_bytes() == PLANTED and sorted(folder.iterdir()) == [planted]  # left as it was


def test_a_cache_folder_of_another_user_is_not_used(cache: dict[str, str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    folder = build.cache_dir(cache)
    folder.mkdir(mode=0o700, parents=True)
    os.chown(folder, OTHER_UID, OTHER_UID)
    library = build.collector_library(cache)
    assert library.parent != folder and _is_a_fresh_build(library) and not any(folder.iterdir())


def _ship(shipped: Path, library: Path, machine: str, name: str | None = None) -> Path:
    (shipped / machine).mkdir(mode=0o755)
    copy = shipped / machine / (name or build.library_name())
    shutil.copy(library, copy)
    copy.chmod(0o755)
    return copy


def test_the_library_shipped_for_this_machine_is_used_without_a_compiler(collector: Path, shipped: Path,
                                                                         tmp_path: Path) -> None:
    if platform.machine() not in build.PREBUILT_MACHINES:
        pytest.skip(f"no collector is shipped for {platform.machine()}")
    copy = _ship(shipped, collector, platform.machine())
    no_compiler = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PATH": str(tmp_path / "empty"), "CC": ""}
    assert build.collector_library(no_compiler) == copy and not (tmp_path / "xdg").exists()
    assert build.prebuilt() == (copy, "shipped")


def test_a_library_shipped_for_another_machine_is_not_used(collector: Path, shipped: Path) -> None:
    other = next(m for m in build.PREBUILT_MACHINES if m != platform.machine())
    _ship(shipped, collector, other)
    assert build.prebuilt()[0] is None
    assert build.prebuilt("riscv64") == (None, "none is shipped for riscv64")


def test_a_library_shipped_from_another_source_is_not_used(collector: Path, shipped: Path,
                                                           cache: dict[str, str]) -> None:
    # A checkout whose collector.c was edited since make wheel: the old build must not run.
    machine = build.PREBUILT_MACHINES[0]
    stale = _ship(shipped, collector, machine, "collector-0123456789abcdef.so")
    assert build.prebuilt(machine) == (None, "the one shipped was built from another source")
    if platform.machine() == machine:
        assert build.collector_library(cache) != stale


def test_a_shipped_library_others_can_write_is_not_used(collector: Path, shipped: Path) -> None:
    machine = build.PREBUILT_MACHINES[0]
    copy = _ship(shipped, collector, machine)
    copy.chmod(0o777)
    library, why_not = build.prebuilt(machine)
    assert library is None and "could be written by someone else" in why_not
    copy.chmod(0o755)
    copy.parent.chmod(0o777)
    assert build.prebuilt(machine)[0] is None


def test_no_prebuilt_and_no_compiler_says_both(shipped: Path, tmp_path: Path) -> None:
    no_compiler = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PATH": str(tmp_path / "empty"), "CC": ""}
    with pytest.raises(build.CollectorBuildError) as refused:
        build.collector_library(no_compiler)
    assert "no prebuilt collector: " in str(refused.value) and "no C compiler (cc, gcc or clang)" in str(refused.value)


def test_a_shipped_library_of_another_account_is_used_only_where_that_account_keeps_the_package(
        collector: Path, shipped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    machine = build.PREBUILT_MACHINES[0]
    copy = _ship(shipped, collector, machine)
    os.chown(copy.parent, OTHER_UID, OTHER_UID)
    os.chown(copy, OTHER_UID, OTHER_UID)
    assert build.prebuilt(machine)[0] is None  # the package (this module) is root's: a stranger's file
    module = tmp_path / "build.py"
    module.write_text("")
    os.chown(module, OTHER_UID, OTHER_UID)
    monkeypatch.setattr(build, "__file__", str(module))  # a shared environment kept by that account
    assert build.prebuilt(machine) == (copy, "shipped")


def test_a_private_folder_of_one_run_is_removed_by_that_process_alone(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    build._remove_in(os.getpid() + 1, folder)  # a forked child's exit
    assert folder.is_dir()
    build._remove_in(os.getpid(), folder)
    assert not folder.exists()


def test_trace_never_injects_a_planted_library(cache: dict[str, str], fakes: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    # Through the real entry point: a library anyone could have written, where trace would look for its build.
    from bisect_smem.app.cli.main import main

    folder = build.cache_dir(cache)
    folder.mkdir(mode=0o700, parents=True)
    planted = folder / build.library_name()
    planted.write_bytes(PLANTED)
    planted.chmod(0o666)
    monkeypatch.setenv("XDG_CACHE_HOME", cache["XDG_CACHE_HOME"])
    monkeypatch.setenv("BISECT_SMEM_CUPTI_LIBRARY", str(fakes / "libcupti.so.13"))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "sh", "-c", 'echo "$CUDA_INJECTION64_PATH"'])
    injected = Path(capfd.readouterr().out.splitlines()[0])
    assert code == 0 and injected == planted and _is_a_fresh_build(injected)  # rebuilt in its place
