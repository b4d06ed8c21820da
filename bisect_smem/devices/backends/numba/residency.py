"""The numba backend's residency probe: every SM filled with blocks of one size through numba's launch, the
blocks resident at once counted beside what the driver's occupancy API predicts. numba-cuda has no
carveout preference, so this backend does not implement the carveout family.

A mixin of NumbaSession (backend.py), which imports numba and hands over its ``cuda`` module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bisect_smem.devices.backends.base import CudaErrorFunnel, driver_value
from bisect_smem.devices.backends.batches import read_then_decode
from bisect_smem.devices.backends.driver_calls import cuda_driver
from bisect_smem.devices.backends.families import Residency
from bisect_smem.devices.backends.numba.driver import kernel_handle, set_kernel_max_dynamic_smem
from bisect_smem.devices.kernel_abi import RESIDENCY_COUNTER_WORDS, ResidencyWord
from bisect_smem.devices.probes import (
    Outcome,
    ResidencyOutcome,
    ResidencyProbe,
    classify_cuda_error,
    residency_from_peaks,
)

W_PEAK, COUNTER_STRIDE = int(ResidencyWord.PEAK), len(ResidencyWord)


class NumbaResidency(Residency):
    """The residency staircase through numba's launches and cuda-bindings' occupancy API."""

    # What this probe uses of the session (set by NumbaSession.__init__).
    _cuda: Any
    _np: Any
    _residency: Any
    _residency_grid: int
    cuda_errors: CudaErrorFunnel
    index: int

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, carveout_percent)])[0]

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        # One after another on the default stream (each fills every SM alone), each counting into its own
        # row, read with one copy; an attribute set between two launches applies to the later one only.
        cu = cuda_driver()
        np, cuda = self._np, self._cuda
        with self.cuda_errors() as failed:
            counters = cuda.to_device(np.zeros((len(probes), RESIDENCY_COUNTER_WORDS), dtype=np.uint32))
            function = driver_value(cu.cuKernelGetFunction(cu.CUkernel(kernel_handle(self._residency))))
        if failed:
            return [ResidencyOutcome(failed.outcome, failed.detail) for _ in probes]
        pending: list[ResidencyOutcome | int | None] = []  # per probe: its outcome already, or the API's count
        for row, probe in enumerate(probes):
            if probe.carveout_percent is not None:
                pending.append(ResidencyOutcome(Outcome.OTHER, "the numba backend does not sweep carveouts"))
                continue
            n, threads = probe.dynamic_bytes, probe.threads
            refused, blocks = None, None
            with self.cuda_errors() as failed:
                refused = set_kernel_max_dynamic_smem(self._residency, n, self.index)
                if not refused:
                    blocks = None if function is None else driver_value(
                        cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, n))
                    self._residency[self._residency_grid, threads, 0, n](counters[row], np.uint64(probe.hold_ns))
            if refused:
                pending.append(ResidencyOutcome(classify_cuda_error(refused), refused))
            else:
                pending.append(ResidencyOutcome(failed.outcome, failed.detail) if failed
                               else None if blocks is None else int(blocks))
        return read_then_decode(pending, ResidencyOutcome, self.cuda_errors,
                                lambda: counters.copy_to_host()[:, W_PEAK::COUNTER_STRIDE].tolist(),
                                lambda _, peaks, api: residency_from_peaks(peaks, api))
