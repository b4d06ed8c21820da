"""Validating the shared memory itself (--level full): every SM and every byte (a march test per SM),
every granule (a launch at each allocation-granule multiple up to the ceiling), and nothing left
behind (what an earlier kernel, or an earlier process, left in shared memory).

Coverage is proven, not assumed: each block reads %smid, and a launch that missed an SM is repeated
(at most MAX_MARCH_LAUNCHES times) before the missing SMs are named.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.integrity import GranuleSweep, Leftovers, MarchResult, SmMarch
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.probes import TOO_BIG, LaunchOutcome, Outcome, ProbeKernel
from bisect_smem.devices.validation_abi import DeviceAddress, LeftoverOutcome
from bisect_smem.experiments.steps import Done, Step, block_registers, require_optin

if TYPE_CHECKING:
    from bisect_smem.experiments.measure import DeviceMeasurement

MAX_MARCH_LAUNCHES = 4
MARCH_THREADS = 512
SWEEP_THREADS = 1024
LEFTOVER_THREADS = 512
WRITER_TIMEOUT_S = 120.0
WRITER_MODULE = "bisect_smem.experiments.leftover_writer"


def _ok(outcome: LaunchOutcome | LeftoverOutcome, what: str) -> None:
    """A validation launch must run; any other class is a fault of this step (sticky ones end the worker)."""
    if outcome.outcome is not Outcome.OK:
        raise ProbeFault(what, outcome.outcome, outcome.detail)


def word_bytes(ceiling_bytes: int) -> int:
    """The part of the ceiling the 32-bit-word kernels cover (every ceiling seen so far is a multiple of 16)."""
    return ceiling_bytes - ceiling_bytes % 4


def sweep_sizes(ceiling_bytes: int, granule_bytes: int) -> tuple[int, ...]:
    """Every granule multiple from 0 to the ceiling, the ceiling itself, and the byte after it (last)."""
    if granule_bytes < 1:
        raise ValueError(f"granule bytes must be >= 1 (got {granule_bytes})")
    sizes = list(range(0, ceiling_bytes + 1, granule_bytes))
    if sizes[-1] != ceiling_bytes:
        sizes.append(ceiling_bytes)
    return (*sizes, ceiling_bytes + 1)


class Validation:
    """The validation experiments on one device, with one block per SM."""

    def __init__(self, session: DeviceSession, sm_count: int | None, static_sizes: tuple[int, ...],
                 progress: Callable[[str], None]) -> None:
        self.session = session
        self.sm_count = sm_count
        self.static_sizes = static_sizes
        self.progress = progress

    def _blocks(self) -> int:
        if not self.sm_count:
            raise MeasurementError("needs the SM count (driver attribute 16), which the device did not report")
        return self.sm_count

    def march(self, ceiling_bytes: int) -> MarchResult:
        """The march test on every SM at the opt-in ceiling; a failure on any launch is kept."""
        blocks, dynamic = self._blocks(), word_bytes(ceiling_bytes)
        by_sm: dict[int, SmMarch] = {}
        launches = 0
        while launches < MAX_MARCH_LAUNCHES:
            launches += 1
            self.progress(f"march test: launch {launches}, {blocks} blocks of {dynamic} B")
            outcome = self.session.march(dynamic, MARCH_THREADS, blocks, secrets.randbits(32))
            _ok(outcome, f"march test at {dynamic} B")
            for block in outcome.blocks:
                if block.sm_id not in by_sm or by_sm[block.sm_id].passed:
                    by_sm[block.sm_id] = block
            if len(by_sm) >= blocks:
                break
        failures = tuple(sorted((b for b in by_sm.values() if not b.passed), key=lambda b: b.sm_id))
        return MarchResult(dynamic, MARCH_THREADS, self.sm_count, tuple(sorted(by_sm)), launches, failures)

    def granule_sweep(self, ceiling_bytes: int, granule_bytes: int) -> GranuleSweep:
        """Launch and verify the 0-byte static probe at every granule multiple, and at the ceiling + 1 B."""
        kernel = ProbeKernel(0, opt_in=True)
        over = ceiling_bytes + 1
        # The attribute is raised as far as it goes, so that the byte over is refused by the launch itself
        # where the attribute would allow it.
        accepted = self.session.set_max_dynamic(kernel, over)
        if not accepted.ok:
            if accepted.outcome not in TOO_BIG:
                raise ProbeFault(f"attribute set to {over} B", accepted.outcome, accepted.detail)
            _ok(self.session.set_max_dynamic(kernel, ceiling_bytes), f"attribute set to {ceiling_bytes} B")
        sizes = sweep_sizes(ceiling_bytes, granule_bytes)
        self.progress(f"granule sweep: {len(sizes)} sizes in flight")
        outcomes = self.session.launch_many(kernel, sizes, SWEEP_THREADS)
        failing, detail = [], ""
        for n, outcome in zip(sizes, outcomes, strict=True):
            if outcome.ok:
                continue
            fault = ProbeFault(f"granule sweep at {n} B", outcome.outcome, outcome.detail)
            if fault.sticky:
                raise fault
            if n < over:
                failing.append(n)
                detail = detail or f"{n} B: {outcome.outcome.value} ({outcome.detail})"
        last = outcomes[-1]
        return GranuleSweep(granule_bytes, ceiling_bytes, len(sizes), tuple(failing), detail,
                            over_ceiling_failed=last.outcome in TOO_BIG)

    def leftovers(self, ceiling_bytes: int) -> Leftovers:
        """What an earlier process, then an earlier kernel of this one, left in shared memory for a kernel
        that reads it without writing it."""
        blocks, dynamic = self._blocks(), word_bytes(ceiling_bytes)
        nonce = secrets.randbits(64)
        written = self._write_in_another_process(dynamic, blocks, nonce)
        across = self.session.leftover_read(dynamic, LEFTOVER_THREADS, blocks, nonce)
        _ok(across, "reading what another process left")
        own = secrets.randbits(64)
        _ok(self.session.leftover_write(dynamic, LEFTOVER_THREADS, blocks, own), "writing the leftover pattern")
        within = self.session.leftover_read(dynamic, LEFTOVER_THREADS, blocks, own)
        _ok(within, "reading what this process left")
        return Leftovers(dynamic, within.words, within.matching_words, across.words, across.matching_words,
                         writer_sms=len(set(written.sm_ids)), reader_sms=len(set(across.sm_ids)))

    def _write_in_another_process(self, dynamic: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """Run the leftover writer as a fresh process (a new CUDA context) and wait for it to exit."""
        address = self.session.address()
        with tempfile.TemporaryDirectory(prefix="bisect-smem-") as work:
            result = Path(work, "written.json")
            request = {"backend": address.backend, "index": address.index, "sim_spec": address.sim_spec,
                       "static_sizes": list(self.static_sizes), "dynamic_bytes": dynamic, "threads": LEFTOVER_THREADS,
                       "blocks": blocks, "nonce": nonce, "out": str(result)}
            package_root = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                                             os.environ.get("PYTHONPATH")]))}
            with Path(work, "stderr").open("w") as stderr:
                proc = subprocess.Popen([sys.executable, "-m", WRITER_MODULE, json.dumps(request)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=stderr)
            start = time.monotonic()
            while proc.poll() is None:
                # Progress keeps the supervisor from taking the wait for a hung probe.
                self.progress(f"leftovers: another process writes {blocks} SMs")
                if time.monotonic() - start > WRITER_TIMEOUT_S:
                    proc.kill()
                    proc.wait()
                    raise MeasurementError(f"the writer process did not finish within {WRITER_TIMEOUT_S:g} s")
                time.sleep(0.05)
            errors = Path(work, "stderr").read_text().strip()
            if proc.returncode != 0 or not result.is_file():
                last = errors.splitlines()[-1] if errors else "no output"
                raise MeasurementError(f"the writer process failed (exit {proc.returncode}): {last}")
            data = json.loads(result.read_text())
        outcome = LeftoverOutcome(Outcome(data["outcome"]), data["detail"], tuple(data["sm_ids"]), data["words"])
        _ok(outcome, "another process writing the leftover pattern")
        return outcome


def write_leftovers(request: dict) -> LeftoverOutcome:
    """The writer process's work: open the device anew, fill every SM's shared memory, close it."""
    address = DeviceAddress(request["backend"], request["index"], request["sim_spec"])
    session = address.open(tuple(request["static_sizes"]))
    try:
        return session.leftover_write(request["dynamic_bytes"], request["threads"], request["blocks"],
                                      request["nonce"])
    finally:
        session.close()


# The steps of --level full (plan.py appends them after the standard steps).


@dataclass(frozen=True)
class SmMarchStep(Step):
    """The march test on every SM at the opt-in ceiling."""

    kind: ClassVar[str] = "sm_march"

    def run(self, m: DeviceMeasurement, done: Done) -> MarchResult:  # type: ignore[override]
        """March over every SM's whole dynamic shared memory."""
        return m.validation.march(require_optin(done))

    def contribute(self, value: MarchResult) -> dict[str, Any]:
        """The march result."""
        return {"march": value}


@dataclass(frozen=True)
class GranuleSweepStep(Step):
    """A launch at every allocation-granule multiple up to the opt-in ceiling, and one byte over."""

    kind: ClassVar[str] = "granule_sweep"

    def run(self, m: DeviceMeasurement, done: Done) -> GranuleSweep:  # type: ignore[override]
        """Sweep with the measured granularity (the published one below cc 8.0)."""
        granule = block_registers(done).granule_bytes or (m.profile.allocation_granularity_bytes if m.profile else None)
        if not granule:
            raise MeasurementError("needs the allocation granularity, which was neither measured nor published")
        return m.validation.granule_sweep(require_optin(done), granule)

    def contribute(self, value: GranuleSweep) -> dict[str, Any]:
        """The sweep."""
        return {"granule_sweep": value}


@dataclass(frozen=True)
class LeftoversStep(Step):
    """What an earlier process and an earlier kernel left in shared memory."""

    kind: ClassVar[str] = "leftovers"

    def run(self, m: DeviceMeasurement, done: Done) -> Leftovers:  # type: ignore[override]
        """Another process writes and exits; this one reads without writing."""
        return m.validation.leftovers(require_optin(done))

    def contribute(self, value: Leftovers) -> dict[str, Any]:
        """The leftovers."""
        return {"leftovers": value}


VALIDATION_STEPS: tuple[Step, ...] = (SmMarchStep(), GranuleSweepStep(), LeftoversStep())
