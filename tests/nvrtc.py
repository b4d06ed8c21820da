"""Compile kernels with NVRTC through cuda-bindings, no GPU needed: the package's own compiler, in the
tuple shape the compile checks unpack."""

from __future__ import annotations

from bisect_smem.core.profiles import ArchProfile
from bisect_smem.devices import nvrtc as _nvrtc
from bisect_smem.devices.nvrtc import NvrtcUnavailable, nvrtc_version, supported_archs

__all__ = ["NvrtcUnavailable", "compile_source", "nvrtc_version", "supported_archs", "target"]


def target(profile: ArchProfile) -> str:
    """The NVRTC architecture name of a profile's compute capability, e.g. ``sm_90``."""
    major, minor = profile.compute_capability
    return f"sm_{major}{minor}"


def compile_source(source: str, arch: str, names: list[str], options: tuple[str, ...] = (),
                   cubin: bool = False) -> tuple[bool, str, dict[str, str], bytes]:
    """Compile for ``arch`` (e.g. sm_90). Returns (ok, log, lowered names, PTX or cubin)."""
    built = _nvrtc.compile_source(source, arch, names, options, cubin)
    return built.ok, built.log, built.lowered, built.image
