"""How a batch of probes is planned around a backend's own launch: one probe at a time for a backend that
synchronises every launch (the simulator), and the per-probe loop that both real backends' ``launch_batch``
share (attribute, seed, launch into its own row, one read of every row)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from bisect_smem.devices.backends.base import CudaErrorFunnel
from bisect_smem.devices.backends.families import Ceilings, Residency
from bisect_smem.devices.kernel_abi import decode_probe_result
from bisect_smem.devices.probes import Launch, LaunchOutcome, ResidencyOutcome, ResidencyProbe

Outcome = TypeVar("Outcome", LaunchOutcome, ResidencyOutcome)


def launch_each(session: Ceilings, launches: Sequence[Launch]) -> list[LaunchOutcome]:
    """``launch_batch`` one probe at a time: for backends that synchronise every launch."""
    outcomes = []
    for probe in launches:
        limit = session.set_max_dynamic(probe.kernel, probe.dynamic_bytes) if probe.raise_limit else None
        outcomes.append(limit if limit is not None and not limit.ok
                        else session.launch(probe.kernel, probe.dynamic_bytes, probe.threads))
    return outcomes


def residency_each(session: Residency, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
    """``residency_batch`` one probe at a time: for backends that synchronise every launch."""
    return [session.residency(p.dynamic_bytes, p.threads, p.hold_ns, p.carveout_percent) for p in probes]


def launch_rows(session: Ceilings, launches: Sequence[Launch], seeds: Iterator[int], cuda_errors: CudaErrorFunnel,
                launch_one: Callable[[int, Launch, int], None],
                read_rows: Callable[[], list[list[int]]]) -> list[LaunchOutcome]:
    """``launch_batch`` of a backend that launches each probe into its own row of result words and reads
    them all after one synchronisation.

    Each probe that asks for it has its attribute raised first (a refusal is its outcome and it is not
    launched); the others draw a seed and are launched by ``launch_one(row, probe, seed)``, whose CUDA error
    (a size over the limit is refused when it is enqueued) stays the probe's own. ``read_rows`` then reads
    every row: a fault in any launch surfaces there and is the outcome of every probe still unanswered.
    """
    pending: list[LaunchOutcome | int] = []  # per probe: its outcome already, or the seed to decode with
    for row, probe in enumerate(launches):
        limit = session.set_max_dynamic(probe.kernel, probe.dynamic_bytes) if probe.raise_limit else None
        if limit is not None and not limit.ok:
            pending.append(limit)
            continue
        seed = next(seeds) & 0xFF
        with cuda_errors() as failed:
            launch_one(row, probe, seed)
        pending.append(LaunchOutcome(failed.outcome, failed.detail) if failed else seed)
    return read_then_decode(pending, LaunchOutcome, cuda_errors, read_rows, lambda i, row, seed: decode_probe_result(
        row, launches[i].kernel.static_bytes, launches[i].dynamic_bytes, seed))


def read_then_decode(pending: Sequence[Any], outcome: type[Outcome], cuda_errors: CudaErrorFunnel,
                     read_rows: Callable[[], list[list[int]]],
                     decode: Callable[[int, list[int], Any], Outcome]) -> list[Outcome]:
    """The end of a batch launched into rows: ``pending`` holds, per probe, its outcome already (an
    ``outcome``) or what its row is decoded with. Every row is read at once (the one synchronisation); a CUDA
    error there, a fault in any launch, is the outcome of every probe still unanswered."""
    with cuda_errors() as failed:
        rows = read_rows()
    if failed:
        return [p if isinstance(p, outcome) else outcome(failed.outcome, failed.detail) for p in pending]
    return [p if isinstance(p, outcome) else decode(i, rows[i], p) for i, p in enumerate(pending)]
