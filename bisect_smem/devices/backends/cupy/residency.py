"""The CuPy backend's residency and carveout probes: every SM filled with blocks of one size, the blocks that
were resident at once counted in device memory beside what the occupancy API predicts.

A mixin of CupySession (backend.py), which imports CuPy and hands it over as ``_cupy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bisect_smem.devices.backends.base import CudaErrorFunnel
from bisect_smem.devices.backends.batches import read_then_decode
from bisect_smem.devices.backends.families import Carveout, Residency
from bisect_smem.devices.kernel_abi import (
    RESIDENCY_CARVEOUT,
    RESIDENCY_COUNTER_WORDS,
    RESIDENCY_STAIRCASE,
    ResidencyWord,
    residency_name,
)
from bisect_smem.devices.probes import ResidencyOutcome, ResidencyProbe, residency_from_peaks


class CupyResidency(Residency, Carveout):
    """Residency and carveout sweeps through CuPy's launches and occupancy API."""

    # What these probes use of the session (set by CupySession.__init__).
    _cupy: Any
    _functions: dict[str, Any]
    _residency_grid: int
    cuda_errors: CudaErrorFunnel

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, carveout_percent)])[0]

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, p) for p in percents])

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        # One after another on the legacy default stream: each fills every SM alone. An attribute or a
        # carveout preference set between two launches applies to the later one only.
        cupy = self._cupy
        counters = cupy.zeros((len(probes), RESIDENCY_COUNTER_WORDS), dtype=cupy.uint32)
        pending: list[ResidencyOutcome | int] = []  # per probe: its outcome already, or the API's count
        for row, probe in enumerate(probes):
            variant = RESIDENCY_STAIRCASE if probe.carveout_percent is None else RESIDENCY_CARVEOUT
            fn = self._functions[residency_name(variant)]
            n, threads = probe.dynamic_bytes, probe.threads
            with self.cuda_errors() as failed:
                fn.max_dynamic_shared_size_bytes = n
                if probe.carveout_percent is not None:
                    fn.preferred_shared_memory_carveout = probe.carveout_percent
                api = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, threads, n)
                fn((self._residency_grid,), (threads,), (counters[row], cupy.uint64(probe.hold_ns)), shared_mem=n)
            pending.append(ResidencyOutcome(failed.outcome, failed.detail) if failed else int(api))
        # Copied whole and sliced on the host: a strided device view would need CuPy to compile a copy kernel,
        # which a cold node pays for.
        return read_then_decode(pending, ResidencyOutcome, self.cuda_errors,
                                lambda: counters.get()[:, ResidencyWord.PEAK::len(ResidencyWord)].tolist(),
                                lambda _, peaks, api: residency_from_peaks(peaks, api))
