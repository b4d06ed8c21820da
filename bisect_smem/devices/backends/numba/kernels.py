"""The numba-cuda probe kernels, with the PTX special registers read through inline assembly.

Imported only by numba_backend, inside its functions. numba caches a kernel on disk by its bytecode, the
values it closes over and this file's stamp, so the kernels close over plain ints and bools only (which
registers the device's compute capability has): an intrinsic or a module in a closure would change the
cache key in every process. Nothing is linked in, which is what lets numba cache them at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba import cuda, types, uint8, uint32
from numba.cuda.extending import intrinsic

from bisect_smem.core.hardware import has_aggr_register, has_smem_registers
from bisect_smem.devices.kernel_abi import ProbeFlag, ProbeWord, ResidencyWord

W_WRONG, W_CHECKED = int(ProbeWord.BYTES_WRONG), int(ProbeWord.BYTES_CHECKED)
W_DYNAMIC, W_TOTAL = int(ProbeWord.DYNAMIC_SMEM_SIZE), int(ProbeWord.TOTAL_SMEM_SIZE)
W_BEGIN, W_END, W_CAP = (int(ProbeWord.RESERVED_OFFSET_BEGIN), int(ProbeWord.RESERVED_OFFSET_END),
                         int(ProbeWord.RESERVED_OFFSET_CAP))
W_AGGR, W_LAST_BYTE, W_FLAGS = int(ProbeWord.AGGR_SMEM_SIZE), int(ProbeWord.LAST_DYNAMIC_BYTE), int(ProbeWord.FLAGS)
F_SM80, F_AGGR = int(ProbeFlag.SM80_REGISTERS), int(ProbeFlag.AGGR_REGISTER)
W_NOW, W_PEAK, COUNTER_STRIDE = int(ResidencyWord.NOW), int(ResidencyWord.PEAK), len(ResidencyWord)
PROBE_SIGNATURE = "void(uint32, uint32, uint32[:])"
RESIDENCY_SIGNATURE = "void(uint32[:], uint64)"


def special_register(register: str, bits: int = 32) -> Any:
    """An intrinsic that reads the PTX special register ``%<register>`` (``mov.u<bits>``)."""
    result = types.uint64 if bits == 64 else types.uint32
    constraint = "=l" if bits == 64 else "=r"

    @intrinsic
    def read(typingctx):  # noqa: ANN001, ANN202 - numba's intrinsic protocol
        def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(bits), []), f"mov.u{bits} $0, %{register};", constraint,
                               side_effect=True)
            return builder.call(asm, [])

        return result(), codegen

    return read


dynamic_smem_size = special_register("dynamic_smem_size")
total_smem_size = special_register("total_smem_size")
reserved_smem_offset_begin = special_register("reserved_smem_offset_begin")
reserved_smem_offset_end = special_register("reserved_smem_offset_end")
reserved_smem_offset_cap = special_register("reserved_smem_offset_cap")
aggr_smem_size = special_register("aggr_smem_size")
smid = special_register("smid")
globaltimer = special_register("globaltimer", 64)


def probe_kernel(static: int, sm80: bool, aggr: bool) -> Callable[..., None]:
    """The probe with ``static`` bytes of static shared data; it reads the sm_80 registers only where
    ``sm80`` and %aggr_smem_size only where ``aggr`` (a register the target lacks is never emitted, and
    its words and flag stay clear)."""

    def probe(dynamic_bytes, seed, out):  # noqa: ANN001 - numba-typed
        dynamic_smem = cuda.shared.array(0, dtype=uint8)
        # numba prunes the branch not taken, so a kernel without static data declares none (a
        # zero-sized shared array would mean "dynamic" to numba).
        if static > 0:
            static_smem = cuda.shared.array(static, dtype=uint8)
        else:
            static_smem = cuda.local.array(1, dtype=uint8)
        t, n = cuda.threadIdx.x, cuda.blockDim.x
        for i in range(t, dynamic_bytes, n):
            dynamic_smem[i] = uint8(((i ^ (i >> 8) ^ (i >> 16)) * 151 + seed) & 0xFF)
        for i in range(t, static, n):
            static_smem[i] = uint8(((i ^ (i >> 8) ^ (i >> 16)) * 151 + (seed ^ 0x5A)) & 0xFF)
        cuda.syncthreads()
        bad = uint32(0)
        checked = uint32(0)
        for i in range((t + 1) % n, dynamic_bytes, n):  # read what a neighbour wrote
            if dynamic_smem[i] != uint8(((i ^ (i >> 8) ^ (i >> 16)) * 151 + seed) & 0xFF):
                bad += uint32(1)
            checked += uint32(1)
        for i in range((t + 1) % n, static, n):
            if static_smem[i] != uint8(((i ^ (i >> 8) ^ (i >> 16)) * 151 + (seed ^ 0x5A)) & 0xFF):
                bad += uint32(1)
            checked += uint32(1)
        cuda.atomic.add(out, W_WRONG, bad)
        cuda.atomic.add(out, W_CHECKED, checked)
        if t == 0:
            flags = uint32(0)
            if sm80:
                out[W_DYNAMIC] = dynamic_smem_size()
                out[W_TOTAL] = total_smem_size()
                out[W_BEGIN] = reserved_smem_offset_begin()
                out[W_END] = reserved_smem_offset_end()
                out[W_CAP] = reserved_smem_offset_cap()
                flags |= uint32(F_SM80)
            if aggr:
                out[W_AGGR] = aggr_smem_size()
                flags |= uint32(F_AGGR)
            out[W_FLAGS] = flags
            if dynamic_bytes > 0:
                out[W_LAST_BYTE] = dynamic_smem[dynamic_bytes - 1]

    return probe


def residency(counters, hold_ns):  # noqa: ANN001 - numba-typed
    """Each block counts itself in on its SM, holds for ``hold_ns``, and counts itself out."""
    sm = uint32(0)
    if cuda.threadIdx.x == 0:
        sm = smid()
        now = cuda.atomic.add(counters, COUNTER_STRIDE * sm + W_NOW, uint32(1)) + uint32(1)
        cuda.atomic.max(counters, COUNTER_STRIDE * sm + W_PEAK, now)
        start = globaltimer()
        while globaltimer() - start < hold_ns:
            pass
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.sub(counters, COUNTER_STRIDE * sm + W_NOW, uint32(1))


def kernel_functions(cc: tuple[int, int], static_sizes: tuple[int, ...]) -> dict[str, Callable[..., None]]:
    """The Python kernel functions for a device of compute capability ``cc`` (not yet compiled): a probe
    per static size (``probe:<bytes>``), and ``residency``."""
    sm80, aggr = has_smem_registers(cc), has_aggr_register(cc)
    functions = {f"probe:{s}": probe_kernel(s, sm80, aggr) for s in static_sizes}
    functions["residency"] = residency
    return functions
