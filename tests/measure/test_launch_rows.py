"""The per-probe loop the CuPy and numba ``launch_batch`` share (batches.launch_rows), around a device that
writes its result words as the probe kernel does: a refused attribute and a refused launch stay with their
probe, a fault at the one read is every launched probe's, and each row is decoded with its own seed."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from bisect_smem.core.hardware import DEFAULT_SMEM_PER_BLOCK_BYTES
from bisect_smem.devices.backends.base import CudaErrorFunnel
from bisect_smem.devices.backends.batches import launch_rows
from bisect_smem.devices.kernel_abi import RESULT_WORDS, ProbeWord, pattern_byte
from bisect_smem.devices.probes import Launch, LaunchOutcome, Outcome, ProbeKernel

OPTIN_BYTES = 232448  # an H200's opt-in limit


class Device:
    """One probe kernel per ProbeKernel with its attribute, on a device whose opt-in limit is OPTIN_BYTES.
    A launch over the kernel's attribute is refused when enqueued, as the driver does; one that runs
    writes the words the kernel writes. ``fault_at_read`` poisons the context before the read."""

    def __init__(self, fault_at_read: bool = False, wrong_seed: bool = False) -> None:
        self.limits: dict[ProbeKernel, int] = {}
        self.rows = [[0] * RESULT_WORDS for _ in range(8)]
        self.launched: list[tuple[int, int]] = []  # (row, seed)
        self.fault_at_read, self.wrong_seed = fault_at_read, wrong_seed
        self.cuda_errors = CudaErrorFunnel((RuntimeError,))
        self.seeds = itertools.count(1)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if nbytes + kernel.static_bytes > OPTIN_BYTES:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE")
        self.limits[kernel] = nbytes
        return LaunchOutcome(Outcome.OK)

    def launch_one(self, row: int, probe: Launch, seed: int) -> None:
        limit = self.limits.get(probe.kernel, DEFAULT_SMEM_PER_BLOCK_BYTES - probe.kernel.static_bytes)
        if probe.dynamic_bytes > limit:
            raise RuntimeError("CUDA_ERROR_INVALID_VALUE: invalid argument")
        self.launched.append((row, seed))
        words = self.rows[row]
        words[ProbeWord.BYTES_CHECKED] = probe.dynamic_bytes + probe.kernel.static_bytes
        written = seed + 1 if self.wrong_seed else seed
        words[ProbeWord.LAST_DYNAMIC_BYTE] = pattern_byte(probe.dynamic_bytes - 1, written) & 0xFF

    def read_rows(self) -> list[list[int]]:
        if self.fault_at_read:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
        return [list(words) for words in self.rows]

    def batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        return launch_rows(self, launches, self.seeds, self.cuda_errors, self.launch_one, self.read_rows)


OPTIN = ProbeKernel(0, True)
DEFAULT = ProbeKernel(1024, False)
PROBES = [Launch(OPTIN, 200_000, 128, raise_limit=True),
          Launch(OPTIN, OPTIN_BYTES + 16, 128, raise_limit=True),  # the attribute refuses this one
          Launch(DEFAULT, 48_200, 256),  # over the fresh kernel's 48 KB less its static data: refused at launch
          Launch(DEFAULT, 4096, 32), Launch(OPTIN, 4096, 1024)]  # under the attribute the first one set


def test_each_refusal_stays_with_its_probe_and_the_others_are_verified() -> None:
    device = Device()
    got = device.batch(PROBES)
    assert [o.outcome for o in got] == [Outcome.OK, Outcome.INVALID_VALUE, Outcome.INVALID_VALUE, Outcome.OK,
                                        Outcome.OK]
    assert [o.bytes_verified for o in got] == [200_000, 0, 0, 4096 + 1024, 4096]
    assert "invalid argument" in got[2].detail and got[1].detail == "CUDA_ERROR_INVALID_VALUE"
    # The probe the attribute refused is never launched and draws no seed; a refused launch drew one.
    assert device.launched == [(0, 1), (3, 3), (4, 4)]


def test_a_fault_at_the_read_is_every_launched_probe_s() -> None:
    got = Device(fault_at_read=True).batch(PROBES)
    assert [o.outcome for o in got] == [Outcome.ILLEGAL_ADDRESS, Outcome.INVALID_VALUE, Outcome.INVALID_VALUE,
                                        Outcome.ILLEGAL_ADDRESS, Outcome.ILLEGAL_ADDRESS]
    assert got[0].detail.startswith("CUDA_ERROR_ILLEGAL_ADDRESS")


@pytest.mark.parametrize("size", [1, 4096, 200_000])
def test_each_row_is_decoded_with_its_own_seed(size: int) -> None:
    # A pattern written with another seed than the probe drew does not read back as its own.
    (got,) = Device(wrong_seed=True).batch([Launch(OPTIN, size, 128, raise_limit=True)])
    assert got.outcome is Outcome.VERIFY_FAILED and "last byte" in got.detail
    (got,) = Device().batch([Launch(OPTIN, size, 128, raise_limit=True)])
    assert got.outcome is Outcome.OK and got.bytes_verified == size
