"""The probe families a device session may implement, one small protocol each, and the one question asked
of a session (or of a backend's session class before any device is opened): does it implement family X?

Every session answers ``DeviceSession`` (base.py: who the device is, what it reports, close). Beyond that a
backend implements the families it can measure: the ceilings (every backend), residency, carveout,
clusters, integrity (--level full), and the test-only fault seam. A session class names the families it
implements among its bases (``class NumbaSession(Ceilings, Residency)``); what it lacks is a protocol it does
not name, never a string in a list, and a step of a family its backend lacks is left out of the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends.base import DeviceAddress
from bisect_smem.devices.probes import (
    ClusterOutcome,
    ClusterResidencyOutcome,
    Launch,
    LaunchOutcome,
    LeftoverOutcome,
    MarchFault,
    MarchOutcome,
    ProbeKernel,
    ResidencyOutcome,
    ResidencyProbe,
)


@runtime_checkable
class Ceilings(Protocol):
    """The per-block ceilings: the opt-in attribute, single-block launches that write and read back every
    byte, and what the occupancy API says a block may have."""

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        """cudaFuncSetAttribute(MaxDynamicSharedMemorySize, nbytes) on an opt-in kernel."""
        ...

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        """Launch one block, write a pattern over every shared byte, read it back."""
        ...

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        """``launch`` of each probe, of any kernels and block sizes, each into its own result words, all read
        after one synchronisation; a probe's refused attribute or refused launch is its own outcome, a
        fault at the synchronisation every unanswered probe's."""
        ...

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        """cuOccupancyAvailableDynamicSMemPerBlock at one block per SM, capped by the function's current
        MaxDynamicSharedMemorySize attribute; None where this backend cannot ask."""
        ...


@runtime_checkable
class Residency(Protocol):
    """How many blocks of a size really co-reside on an SM, beside what the occupancy API predicts."""

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        """Fill every SM with blocks of ``dynamic_bytes`` and count how many really co-reside.

        With ``carveout_percent`` the carveout-sweep function is used and its preference set first.
        """
        ...

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        """``residency`` of each probe, one after another on one stream (each fills the device alone), each
        counting into its own words, all read after one synchronisation."""
        ...


@runtime_checkable
class Carveout(Protocol):
    """Residency under each preferred shared-memory carveout."""

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        """``residency`` under each carveout preference, launched back to back and read once at the end."""
        ...


@runtime_checkable
class Clusters(Protocol):
    """Thread block clusters: which sizes launch with distributed shared memory, and how many co-reside."""

    def cluster_support(self) -> str | None:
        """None when clusters can be measured on this device, else why not (cc, attribute 120, bindings)."""
        ...

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        """Launch one cluster of each size in order, each checking distributed shared memory; stop after
        the first size that does not launch (its outcome is the last in the list)."""
        ...

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        """Launch ``clusters`` clusters and count how many were resident at once."""
        ...

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        """cuOccupancyMaxPotentialClusterSize for the non-portable function."""
        ...


@runtime_checkable
class Integrity(Protocol):
    """Validation (--level full): one block per SM, each with its own result slot, over the whole dynamic
    shared memory; and the device's address, so that another process can leave data behind on it."""

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int,
              fault: MarchFault | None = None) -> MarchOutcome:
        """``blocks`` blocks, each running the march test over its whole dynamic shared memory (``fault``,
        test only: with that word of that SM corrupted between the write and the read)."""
        ...

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """Fill every block's dynamic shared memory with the pattern of ``nonce``."""
        ...

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """Read every block's dynamic shared memory without writing it; count words of ``nonce``'s pattern."""
        ...

    def address(self) -> DeviceAddress:
        """How another process opens this device."""
        ...


@runtime_checkable
class FaultSeam(Protocol):
    """Test only: a real fault on demand (--inject-fault), to prove that a poisoned context is survived."""

    def inject_illegal_access(self) -> None:
        """Make the context unusable, as a real out-of-window store does."""
        ...


FAMILIES: tuple[type, ...] = (Ceilings, Residency, Carveout, Clusters, Integrity, FaultSeam)


def supports(session: object, family: type) -> bool:
    """Whether ``session`` (an opened session, or a backend's session class before any device is opened)
    implements the probe family ``family``, one of FAMILIES."""
    if family not in FAMILIES:
        raise ValueError(f"{family!r} is not a probe family (one of {', '.join(f.__name__ for f in FAMILIES)})")
    return issubclass(session if isinstance(session, type) else type(session), family)


def inject_illegal_access(session: object, backend: str) -> None:
    """Test only: poison ``session``'s context through its fault seam; a backend without one is bad usage."""
    if not supports(session, FaultSeam):
        raise UsageError(f"--inject-fault needs a backend with a faulting probe: the {backend} backend has none")
    session.inject_illegal_access()
