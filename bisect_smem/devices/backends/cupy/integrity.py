"""The CuPy backend's integrity probes (--level full): the march test and the leftover kernels, one block
per SM at the opt-in ceiling, each block with its own result slot, all read after one synchronisation.

A mixin of CupySession (backend.py), which imports CuPy and hands it over as ``_cupy``.
"""

from __future__ import annotations

from typing import Any

from bisect_smem.devices.backends.base import CudaErrorFunnel, DeviceAddress
from bisect_smem.devices.backends.families import Integrity
from bisect_smem.devices.kernel_abi import MARCH_FAULT_NAME
from bisect_smem.devices.probes import LeftoverOutcome, MarchFault, MarchOutcome, Outcome
from bisect_smem.devices.validation_abi import (
    LEFTOVER_READ_NAME,
    LEFTOVER_SLOT_WORDS,
    LEFTOVER_WRITE_NAME,
    MARCH_NAME,
    MARCH_SLOT_WORDS,
    decode_leftover_slots,
    decode_march_slot,
)


class CupyIntegrity(Integrity):
    """The validation kernels through CuPy."""

    # What these probes use of the session (set by CupySession.__init__).
    _cupy: Any
    _functions: dict[str, Any]
    cuda_errors: CudaErrorFunnel
    index: int

    def _per_block(self, name: str, dynamic_bytes: int, threads: int, blocks: int, slot_words: int,
                   args: tuple, after: tuple = ()) -> tuple[list[int] | None, Any]:
        """Launch ``name`` with one result slot per block (between ``args`` and ``after``) and read every
        slot back (one synchronisation)."""
        cupy = self._cupy
        fn = self._functions[name]
        slots = cupy.zeros(blocks * slot_words, dtype=cupy.uint32)
        with self.cuda_errors() as failed:
            fn.max_dynamic_shared_size_bytes = dynamic_bytes
            fn((blocks,), (threads,), (cupy.uint32(dynamic_bytes), *args, slots, *after), shared_mem=dynamic_bytes)
            words = slots.get().tolist()
        return (None, failed) if failed else (words, failed)

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int,
              fault: MarchFault | None = None) -> MarchOutcome:
        u32 = self._cupy.uint32
        planted = () if fault is None else (u32(fault.sm_id), u32(fault.word), u32(fault.mask))
        words, failed = self._per_block(MARCH_NAME if fault is None else MARCH_FAULT_NAME, dynamic_bytes, threads,
                                        blocks, MARCH_SLOT_WORDS, (u32(seed),), planted)
        if words is None:
            return MarchOutcome(failed.outcome, failed.detail)
        slots = (decode_march_slot(words[b:b + MARCH_SLOT_WORDS]) for b in range(0, len(words), MARCH_SLOT_WORDS))
        return MarchOutcome(Outcome.OK, "", tuple(s for s in slots if s is not None))

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        words, failed = self._per_block(LEFTOVER_WRITE_NAME, dynamic_bytes, threads, blocks, LEFTOVER_SLOT_WORDS,
                                        (self._cupy.uint64(nonce),))
        return LeftoverOutcome(failed.outcome, failed.detail) if words is None else decode_leftover_slots(words)

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        words, failed = self._per_block(LEFTOVER_READ_NAME, dynamic_bytes, threads, blocks, LEFTOVER_SLOT_WORDS,
                                        (self._cupy.uint64(nonce),))
        return LeftoverOutcome(failed.outcome, failed.detail) if words is None else decode_leftover_slots(words)

    def address(self) -> DeviceAddress:
        return DeviceAddress("cupy", self.index)
