"""The probe kernels compile with NVRTC for every architecture in the profile table (no GPU needed)."""

from __future__ import annotations

import pytest

from bisect_smem.core.profiles import PROFILES, ArchProfile
from bisect_smem.devices.kernel_abi import (
    FAULT_VARIANT_NAMES,
    MARCH_FAULT_NAME,
    NVRTC_OPTIONS,
    PROBE_FILE,
    PROBE_HOLE_NAME,
    VALIDATE_FILE,
    VALIDATE_NAMES,
    module_name_expressions,
    module_source,
    probe_name,
    probe_name_expressions,
    read_kernel,
)
from bisect_smem.experiments.config import DEFAULT_STATIC_SIZES
from tests.nvrtc import NvrtcUnavailable, compile_source, nvrtc_version, supported_archs, target


def _require_arch(profile: ArchProfile) -> None:
    try:
        archs = supported_archs()
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks (the test extra has it): {exc}")
    number = profile.compute_capability[0] * 10 + profile.compute_capability[1]
    if number not in archs:
        pytest.skip(f"NVRTC {nvrtc_version()} cannot target {target(profile)} (supports {list(archs)})")


@pytest.mark.parametrize("profile", PROFILES, ids=target)
def test_probe_kernels_compile_for_every_profile(profile: ArchProfile) -> None:
    _require_arch(profile)
    names = probe_name_expressions(DEFAULT_STATIC_SIZES)
    ok, log, lowered, ptx = compile_source(read_kernel(PROBE_FILE), target(profile), names, NVRTC_OPTIONS)
    assert ok, log
    text = ptx.decode(errors="replace")
    assert len(lowered) == len(names)
    for name in names:
        assert f".entry {lowered[name]}(" in text, name
    # The registers that say what a block really got exist from cc 8.0 (aggregate size from 9.0).
    assert ("%reserved_smem_offset_cap" in text) == (profile.compute_capability >= (8, 0))
    assert ("%aggr_smem_size" in text) == (profile.compute_capability >= (9, 0))


def test_static_shared_memory_over_48k_fails_in_ptxas() -> None:
    _require_arch(next(p for p in PROFILES if p.key == "sm_90"))
    name = probe_name(48 * 1024 + 16, True)
    ok, log, _, _ = compile_source(read_kernel(PROBE_FILE), "sm_90", [name], NVRTC_OPTIONS, cubin=True)
    assert not ok
    assert "too much shared data" in log, log


@pytest.mark.parametrize("profile", PROFILES, ids=target)
def test_validation_kernels_compile_without_static_shared_memory(profile: ArchProfile) -> None:
    # One block per SM at the opt-in ceiling only fits when the whole budget is the dynamic array.
    _require_arch(profile)
    names = list(VALIDATE_NAMES)
    ok, log, lowered, ptx = compile_source(read_kernel(VALIDATE_FILE), target(profile), names, NVRTC_OPTIONS)
    assert ok, log
    text = ptx.decode(errors="replace")
    for name in names:
        assert f".entry {lowered[name]}(" in text, name
    shared = [line.strip() for line in text.splitlines() if ".shared" in line and line.strip().startswith(".")]
    assert shared and all(line.startswith(".extern .shared") for line in shared), shared
    assert "%smid" in text


def test_every_kernel_file_compiles_as_one_module() -> None:
    _require_arch(next(p for p in PROFILES if p.key == "sm_90"))
    names = module_name_expressions(DEFAULT_STATIC_SIZES)
    ok, log, lowered, _ = compile_source(module_source(), "sm_90", names, NVRTC_OPTIONS)
    assert ok, log
    assert set(lowered) == set(names)


@pytest.mark.parametrize("profile", PROFILES, ids=target)
def test_the_planted_fault_variants_compile_beside_the_kernels_they_copy(profile: ArchProfile) -> None:
    # The test-only kernels that prove the detection path on a GPU: the march with one word of one SM
    # corrupted, and the 0-byte static opt-in probe with a hole at one size. Validation runs include them.
    _require_arch(profile)
    source = read_kernel(VALIDATE_FILE) + "\n" + read_kernel(PROBE_FILE)
    names = [*VALIDATE_NAMES, *FAULT_VARIANT_NAMES, probe_name(0, True)]
    ok, log, lowered, ptx = compile_source(source, target(profile), names, NVRTC_OPTIONS)
    assert ok, log
    text = ptx.decode(errors="replace")
    entries = {name: text.split(f".entry {lowered[name]}(", 1)[1].split(".entry", 1)[0] for name in names}
    # The fault variants take their extra arguments (SM, word, mask; the hole's size) and no static data.
    assert entries[MARCH_FAULT_NAME].split(")", 1)[0].count(".param") == 6
    assert entries[PROBE_HOLE_NAME].split(")", 1)[0].count(".param") == 4
    assert "%smid" in entries[MARCH_FAULT_NAME]
    shared = [line.strip() for line in text.splitlines() if ".shared" in line and line.strip().startswith(".")]
    assert shared and all(line.startswith(".extern .shared") for line in shared), shared
    # The kernels that measure take no fault argument: the planted code is compiled out of them.
    assert entries["smem_march"].split(")", 1)[0].count(".param") == 3
    assert entries[probe_name(0, True)].split(")", 1)[0].count(".param") == 3


def test_only_validation_runs_compile_the_fault_variants() -> None:
    assert set(FAULT_VARIANT_NAMES) <= set(module_name_expressions(DEFAULT_STATIC_SIZES))
    assert set(FAULT_VARIANT_NAMES) <= set(module_name_expressions(DEFAULT_STATIC_SIZES, frozenset({"sm_march"})))
    quick = module_name_expressions(DEFAULT_STATIC_SIZES, frozenset({"default_ceiling", "static_split"}))
    assert not set(FAULT_VARIANT_NAMES) & set(quick)
