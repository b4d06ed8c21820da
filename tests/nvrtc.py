"""Compile kernels with NVRTC through cuda-bindings: no GPU needed."""

from __future__ import annotations

import functools


class NvrtcUnavailable(Exception):
    pass


@functools.cache
def supported_archs() -> tuple[int, ...]:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailable(f"cuda-bindings is not installed ({exc})") from exc
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcUnavailable(f"NVRTC is not loadable ({err})")
    return tuple(archs)


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def compile_source(source: str, arch: str, names: list[str], options: tuple[str, ...] = (),
                   cubin: bool = False) -> tuple[bool, str, dict[str, str], bytes]:
    """Compile for ``arch`` (e.g. sm_90). Returns (ok, log, lowered names, PTX or cubin)."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"probe.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    try:
        for name in names:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, name.encode())
            assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
        target = f"--gpu-architecture={arch if cubin else arch.replace('sm_', 'compute_')}"
        opts = [target.encode(), *(o.encode() for o in options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return False, log_text, {}, b""
        lowered = {}
        for name in names:
            _, low = nvrtc.nvrtcGetLoweredName(prog, name.encode())
            lowered[name] = low.decode()
        if cubin:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            out = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, out)
        else:
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            out = b" " * size
            nvrtc.nvrtcGetPTX(prog, out)
        return True, log_text, lowered, out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
