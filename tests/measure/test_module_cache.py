"""The compiled-module cache: compiled once, then served; a damaged entry is compiled again, never trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisect_smem.devices import nvrtc
from bisect_smem.devices.kernel_abi import NVRTC_OPTIONS, module_name_expressions, module_source

try:
    HAVE_SM90 = 90 in nvrtc.supported_archs()
except nvrtc.NvrtcUnavailable as exc:
    HAVE_SM90, WHY = False, str(exc)
else:
    WHY = "this NVRTC cannot target sm_90"

pytestmark = pytest.mark.skipif(not HAVE_SM90, reason=WHY)
NAMES = module_name_expressions((0, 1024), frozenset({"default_ceiling", "static_split"}))


def test_a_module_is_compiled_once_then_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, lowered = nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90", tmp_path)
    assert path.read_bytes()[:4] == b"\x7fELF" and set(lowered) == set(NAMES)
    assert all(name.startswith("_Z") for name in lowered.values())  # mangled: what the driver looks up

    def no_compile(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a cached module was compiled again")

    monkeypatch.setattr(nvrtc, "compile_source", no_compile)
    again_path, again = nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90", tmp_path)
    assert (again_path, again) == (path, lowered)


@pytest.mark.parametrize("damage", ["truncate cubin", "corrupt index", "names differ"])
def test_a_damaged_entry_is_compiled_again(damage: str, tmp_path: Path) -> None:
    path, lowered = nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90", tmp_path)
    index = path.with_suffix(".json")
    if damage == "truncate cubin":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "corrupt index":
        index.write_text("{not json")
    else:
        index.write_text(index.read_text().replace(NAMES[0], "smem_probe<7u, 0>"))
    rebuilt, again = nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90", tmp_path)
    assert again == lowered and rebuilt.read_bytes()[:4] == b"\x7fELF" and len(rebuilt.read_bytes()) > 100


def test_the_key_changes_with_everything_that_changes_the_image() -> None:
    base = nvrtc.cache_key("src", ["a"], ("-std=c++17",), "sm_90", "13.0")
    assert len({base, nvrtc.cache_key("src2", ["a"], ("-std=c++17",), "sm_90", "13.0"),
                nvrtc.cache_key("src", ["a", "b"], ("-std=c++17",), "sm_90", "13.0"),
                nvrtc.cache_key("src", ["a"], (), "sm_90", "13.0"),
                nvrtc.cache_key("src", ["a"], ("-std=c++17",), "sm_100", "13.0"),
                nvrtc.cache_key("src", ["a"], ("-std=c++17",), "sm_90", "13.1")}) == 6


def test_a_source_that_does_not_compile_says_why(tmp_path: Path) -> None:
    with pytest.raises(nvrtc.CompileFailed, match="error"):
        nvrtc.cached_cubin("__global__ void k() { undeclared(); }", [], (), "sm_90", tmp_path)
    assert not list(tmp_path.glob("*.cubin"))


def test_workers_that_miss_one_entry_at_once_compile_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workers of several devices (and the supervisor, which prepares the module beside them) that all
    # miss the same entry wait for the first one's compile, then load it.
    import threading
    import time

    real, compiles = nvrtc.compile_source, []

    def slow_compile(*args: object, **kwargs: object) -> nvrtc.Compiled:
        compiles.append(threading.current_thread().name)
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(nvrtc, "compile_source", slow_compile)
    found: list[tuple[Path, dict[str, str]]] = []
    workers = [threading.Thread(target=lambda: found.append(
        nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90", tmp_path))) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(compiles) == 1 and len(found) == 4 and len({path for path, _ in found}) == 1
    assert all(lowered == found[0][1] for _, lowered in found)


def test_the_supervisor_compiles_the_module_each_worker_then_loads(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_smem.devices.backends.cupy import backend as cupy_backend

    class H200s:
        def attribute(self, attribute_id: int, ordinal: int) -> int:
            return {75: 9, 76: 0}[attribute_id]  # compute capability major, minor

    monkeypatch.setenv(nvrtc.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cupy_backend, "libcuda", lambda: H200s())
    kinds = frozenset({"default_ceiling", "static_split"})
    cupy_backend.CupyBackend().prepare((0, 1, 2, 3), (0, 1024), kinds)
    assert len(list(tmp_path.glob("*.cubin"))) == 1  # four devices of one architecture: one compile

    def no_compile(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a worker compiled the module the supervisor had prepared")

    monkeypatch.setattr(nvrtc, "compile_source", no_compile)
    path, lowered = nvrtc.cached_cubin(module_source(), NAMES, NVRTC_OPTIONS, "sm_90")
    assert path.parent == tmp_path and set(lowered) == set(NAMES)
