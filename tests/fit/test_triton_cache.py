"""Triton kernels in a trace, known by Triton's cache: real metadata files of Triton 3.6.0's compiles
(tests/data/triton_cache/<hash>/mm.json, as Triton writes them: the matmul of tools/triton_truth compiled
for sm_90 at num_warps 4 / num_stages 3 and 8 / 4, and for sm_120), laid out as a cache and named by
TRITON_CACHE_DIR; and what the trace says where the config cannot be known."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.analysis.fit.triton.cache import compiled_in
from bisect_smem.analysis.trace import explain, fit_advice
from bisect_smem.app.render.trace import render_text
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.trace_events import MAX_DYNAMIC_SHARED, AttributeSet, Launch, LaunchKind, Trace
from tests.paths import DATA

ENTRIES = {json.loads(p.read_text())["target"]["arch"] * 100 + json.loads(p.read_text())["num_stages"]: p.parent
           for p in (DATA / "triton_cache").glob("*/mm.json")}
SM90_S3, SM90_S4, SM120_S3 = ENTRIES[9003], ENTRIES[9004], ENTRIES[12003]


def published(name: str) -> Target:
    profile = find_profile(name)
    assert profile is not None
    return Target.from_profile(profile)


SM90 = published("9.0")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A Triton cache holding the given entries (folders named by their hash, as Triton lays them out)."""
    def holding(*entries: Path) -> Path:
        folder = tmp_path / f"cache{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for entry in entries:
            shutil.copytree(entry, folder / entry.name)
        monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
        return folder
    compiled_in.cache_clear()
    yield holding
    compiled_in.cache_clear()


def test_a_launch_gets_its_config_from_the_cache(cache) -> None:
    cache(SM90_S3, SM90_S4, SM120_S3)
    assert fit_advice("mm", 98304, SM90) == (
        "fit (triton 3.6.0, mm, Triton's cache):",
        "  num_warps 4, num_stages 3, metadata.shared 98304 B, the same as asked",
        "  within the opt-in limit of sm_90 (232448 B), 134144 B to spare")


def test_a_ceiling_set_names_the_one_config_compiled_here(cache) -> None:
    # Triton's launcher sets MaxDynamicSharedMemorySize to the device's ceiling, whatever the kernel needs.
    cache(SM90_S4, SM120_S3)
    lines = fit_advice("mm", 232448, SM90)
    assert lines is not None and lines[1] == ("  num_warps 8, num_stages 4, metadata.shared 131072 B; the process "
                                              "asked 232448 B, the device's ceiling, as Triton's launcher does")


def test_over_the_limit_is_triton_out_of_resources(cache) -> None:
    cache(SM90_S4)
    smaller = replace(SM90, optin_limit_bytes=120000)
    lines = fit_advice("mm", 131072, smaller)
    assert lines is not None and lines[-1] == ("  over the opt-in limit of sm_90 (120000 B) by 11072 B: Triton raises "
                                               "OutOfResources")


def test_several_compilations_are_not_guessed_between(cache) -> None:
    folder = cache(SM90_S3, SM90_S4)
    assert fit_advice("mm", 232448, SM90) == (
        f"fit (triton): 2 compilations of mm in Triton's cache {folder} (num_warps 4, num_stages 3, 98304 B; "
        "num_warps 8, num_stages 4, 131072 B): which one ran is not known from its name",)


def test_where_the_config_cannot_be_known_it_says_why(cache) -> None:
    folder = cache(SM120_S3)
    assert fit_advice("mm", 232448, SM90) == (
        f"fit (triton): mm is in Triton's cache {folder} compiled for sm_120 only, not for this GPU (cc 9.0): its "
        "config here is not known",)
    # Not in the cache at all: a plain name asking for the ceiling is as likely cuDNN's or a CuPy kernel's (on
    # the H100, cuDNN's SDPA kernel and a CuPy RawKernel were both called Triton's so), so nothing is said.
    assert fit_advice("matmul_kernel", 232448, SM90) is None
    assert fit_advice("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", 232448, SM90) is None


def test_names_that_are_no_triton_kernels_get_nothing(cache) -> None:
    cache(SM90_S3)
    assert fit_advice("matmul_kernel", 4096, SM90) is None  # unmangled, but it asked no ceiling
    assert fit_advice("_Z2mmPf", 98304, SM90) is None  # mangled: C++, not Triton
    assert fit_advice("void mm(float*)", 98304, SM90) is None


def test_the_trace_shows_the_caches_config(cache) -> None:
    cache(SM90_S3)
    asked = AttributeSet((7,), "cuFuncSetAttribute", None, 1, MAX_DYNAMIC_SHARED, 232448, 0, "driver", 0, "mm")
    launched = Launch((7,), "cuLaunchKernelEx", 2, "mm", (4, 4, 1), (128, 1, 1), (0, 0, 0), 98304, 0, 0, "driver",
                      False, LaunchKind.LAUNCH, 3)
    explained = explain(Trace((), (asked,), (launched,), 0), SM90, [published("12.0")], lambda n: n, fit_advice)
    (request,) = [r for r in explained.requests if r.kind == "attribute"]
    assert request.fit is not None and request.fit[1].startswith("  num_warps 4, num_stages 3, metadata.shared 98304 B")
    assert "    fit (triton 3.6.0, mm, Triton's cache):" in render_text(explained).splitlines()
