"""The one CUDA-error funnel: CUDA failures become outcomes by their error name, bugs propagate."""

from __future__ import annotations

import pytest

from bisect_smem.devices.backends.base import CudaErrorFunnel
from bisect_smem.devices.probes import Outcome


class FakeDriverError(Exception):
    """Stands for a CUDA layer's exception type (CuPy's CUDADriverError, numba's CudaAPIError)."""


@pytest.mark.parametrize(("text", "outcome"), [
    ("CUDA_ERROR_INVALID_VALUE: invalid argument", Outcome.INVALID_VALUE),
    ("cudaErrorLaunchOutOfResources: too many resources requested", Outcome.OUT_OF_RESOURCES),
    ("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", Outcome.ILLEGAL_ADDRESS),
    ("CUDA_ERROR_SOMETHING_NEW", Outcome.OTHER),
])
def test_a_cuda_error_becomes_its_outcome(text: str, outcome: Outcome) -> None:
    funnel = CudaErrorFunnel((FakeDriverError,))
    with funnel() as failed:
        raise FakeDriverError(text)
    assert bool(failed) and failed.outcome is outcome and failed.detail == text


def test_a_clean_block_leaves_no_failure() -> None:
    with CudaErrorFunnel((FakeDriverError,))() as failed:
        pass
    assert not failed and failed.outcome is None


def test_other_exceptions_and_rejected_ones_propagate() -> None:
    with pytest.raises(KeyError), CudaErrorFunnel((FakeDriverError,))():
        raise KeyError("a bug, not a CUDA failure")
    only_named = CudaErrorFunnel((Exception,), is_cuda=lambda exc: "CUDA_ERROR_" in str(exc))
    with pytest.raises(ValueError), only_named():
        raise ValueError("no error name: a bug")


def test_describe_names_the_error_for_classification() -> None:
    funnel = CudaErrorFunnel((FakeDriverError,), describe=lambda exc: f"CUDA_ERROR_LAUNCH_TIMEOUT: {exc}")
    with funnel() as failed:
        raise FakeDriverError("code 6")
    assert failed.outcome is Outcome.TIMEOUT


def test_driver_results_become_values_or_error_names() -> None:
    from bisect_smem.devices.backends.base import driver_failure, driver_value

    cu = pytest.importorskip("cuda.bindings.driver")
    assert driver_value((cu.CUresult.CUDA_SUCCESS, 7)) == 7
    assert driver_value((cu.CUresult.CUDA_SUCCESS, 1, 2)) == (1, 2)
    assert driver_value((cu.CUresult.CUDA_ERROR_INVALID_VALUE, 7)) is None
    assert driver_failure(cu.CUresult.CUDA_SUCCESS) is None
    assert driver_failure(cu.CUresult.CUDA_ERROR_INVALID_VALUE) == "CUDA_ERROR_INVALID_VALUE"
