"""A probe counts only when every byte read back right; anything else is a fault, never "too big"."""

from __future__ import annotations

import pytest

from bisect_smem.analysis.verdicts import build_verdicts
from bisect_smem.core.attributes import DriverAttributes, ReportedAttributes
from bisect_smem.core.profiles import find_profile
from bisect_smem.devices.backends.sim.backend import SimSession
from bisect_smem.devices.backends.sim.model import DeviceModel
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.kernel_abi import RESULT_WORDS, decode_probe_result, pattern_byte
from bisect_smem.devices.probes import LaunchOutcome, Outcome, ProbeKernel, classify_cuda_error
from bisect_smem.experiments.measure import DeviceMeasurement, MeasureConfig
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.steps import assemble


def words(bad: int = 0, checked: int = 0, last: int = 0) -> list[int]:
    w = [0] * RESULT_WORDS
    w[0], w[1], w[8], w[9] = bad, checked, last, 3
    return w


def test_all_bytes_right_is_ok() -> None:
    out = decode_probe_result(words(checked=1000 + 16, last=pattern_byte(999, 7)), 16, 1000, 7)
    assert out.outcome is Outcome.OK and out.bytes_verified == 1016


@pytest.mark.parametrize("w, problem", [
    (words(checked=1015, last=pattern_byte(999, 7)), "read back 1015 of 1016 B"),
    (words(bad=1, checked=1016, last=pattern_byte(999, 7)), "1 B wrong"),
    (words(checked=1016, last=pattern_byte(999, 7) ^ 1), "last byte"),
])
def test_anything_less_is_a_verify_failure(w: list[int], problem: str) -> None:
    out = decode_probe_result(w, 16, 1000, 7)
    assert out.outcome is Outcome.VERIFY_FAILED and problem in out.detail


@pytest.mark.parametrize("message, outcome", [
    ("CUDA_ERROR_INVALID_VALUE: invalid argument", Outcome.INVALID_VALUE),
    ("cudaErrorLaunchOutOfResources: too many resources requested", Outcome.OUT_OF_RESOURCES),
    ("CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image", Outcome.NO_BINARY),
    ("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", Outcome.ILLEGAL_ADDRESS),
    ("CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES", Outcome.CLUSTER_MISCONFIG),
    ("CUDA_ERROR_LAUNCH_TIMEOUT", Outcome.TIMEOUT),
    ("CUDA_ERROR_UNKNOWN", Outcome.OTHER),
])
def test_cuda_errors_are_classified(message: str, outcome: Outcome) -> None:
    assert classify_cuda_error(message) is outcome


class CorruptAbove(SimSession):
    """A device whose shared memory reads back wrong above some size: it launches, but lies."""

    def __init__(self, threshold: int) -> None:
        super().__init__(0, SimSpec(DeviceModel.from_profile(find_profile("h200"))), (0, 1, 1024, 16384, 49152))
        self.threshold = threshold

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        out = super().launch(kernel, dynamic_bytes, threads)
        if out.ok and dynamic_bytes > self.threshold:
            return LaunchOutcome(Outcome.VERIFY_FAILED, "3 B wrong", out.registers, dynamic_bytes - 3)
        return out


def test_a_launch_that_does_not_verify_is_never_a_ceiling() -> None:
    session = CorruptAbove(threshold=100_000)
    config = MeasureConfig()
    measured, _ = assemble(DeviceMeasurement(session, config).run(plan_steps(config))[0])
    assert measured.optin_dynamic_ceiling_bytes is None
    reported = ReportedAttributes(driver=DriverAttributes(max_shared_memory_per_block_optin_bytes=232448,
                                                          max_shared_memory_per_block_bytes=49152))
    rows = build_verdicts(reported, measured, find_profile("h200"))
    split_rows = [r for r in rows if r.quantity.startswith("opt-in dynamic ceiling")]
    assert split_rows and all(r.verdict == "ERROR" and "verify_failed" in r.note for r in split_rows)
    assert not any(r.verdict == "match" for r in split_rows)
