"""A simulated device built from a published profile: the whole pipeline runs on it without a GPU.

It models the documented rules, not CuPy's calls: 48 KB without opt-in, dynamic + static within the
opt-in limit, 48 KB static at compile time, the reserved window and the allocation granularity
reported by the PTX registers from cc 8.0 on, and the 16-byte alignment of the dynamic array (the rules
of core.hardware). Where the table leaves the reserved size unconfirmed,
the model uses 1 KB from cc 8.0 on.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import KernelCompileError, UsageError
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    KIB,
    MAX_THREADS_PER_BLOCK,
    NONPORTABLE_CLUSTER_SIZE,
    PORTABLE_CLUSTER_SIZE,
    SMS_PER_GPC,
    STATIC_SMEM_COMPILE_CAP_BYTES,
    DriverAttribute,
    block_footprint,
    blocks_per_sm,
    ceil_div,
    default_reserved_bytes,
    has_aggr_register,
    has_smem_registers,
    round_up,
    static_footprint,
)
from bisect_smem.core.profiles import ArchProfile, find_profile, profile_names
from bisect_smem.devices import attributes
from bisect_smem.devices.backends.base import DeviceIdentity, launch_each
from bisect_smem.devices.probes import (
    ClusterOutcome,
    ClusterResidencyOutcome,
    LaunchOutcome,
    Outcome,
    ProbeKernel,
    ResidencyOutcome,
    SmemRegisters,
)
from bisect_smem.devices.validation_abi import (
    DeviceAddress,
    LeftoverOutcome,
    MarchOutcome,
    simulate_march,
)

SPEC_HELP = """--simulate PROFILE[,KEY=VALUE...]: a simulated device from the published table.
  faults:    flaky=P       probes within one granule of a limit answer wrongly with probability P
             hole=BYTES    a launch of exactly BYTES dynamic fails, below the ceiling
             sticky=BYTES  a launch of BYTES or more poisons the context (as an illegal address does)
             hang=BYTES    a launch of BYTES or more never returns
             seed=N        the random seed of flaky (default 0)
             bitflip=SM:OFFSET  SM number SM reads one bit of byte OFFSET of its shared memory wrong
             holes=START-END    a launch of any dynamic size from START to END (inclusive) fails
             leak=yes|no   shared memory keeps its data when a CUDA context ends (default no)
  overrides: optin=BYTES, smem_per_sm=BYTES, reserved=BYTES (a device that differs from its table row),
             fewer=N       every SM holds N fewer blocks than the occupancy API predicts
--simulate REPORT.json[,device=N,FAULT...]: replay device N (default 0) of a saved report or baseline;
  it takes the faults flaky, seed, hole, sticky and hang."""

FAULT_KEYS = ("flaky", "seed", "hole", "sticky", "hang")  # the faults a replayed report takes too
_FAULT_SIZE_KEYS = ("hole", "sticky", "hang")
_OVERRIDE_KEYS = ("optin", "smem_per_sm", "reserved")
_PROFILE_KEYS = (*FAULT_KEYS, *_OVERRIDE_KEYS)
_VALIDATION_KEYS = ("bitflip", "holes", "leak")


@dataclass(frozen=True)
class SimSpec:
    """One simulated device: a profile, optional overrides, optional faults. Picklable for worker processes."""

    profile: ArchProfile
    flaky: float = 0.0
    hole_bytes: int | None = None
    sticky_bytes: int | None = None
    hang_bytes: int | None = None
    seed: int = 0
    reserved_override: int | None = None
    text: str = ""
    fewer_blocks: int = 0  # residency below the API's prediction by this many blocks per SM
    replay: Any = None  # a replay.ReplayData: the device is modelled from a saved measurement
    bitflip: tuple[int, int] | None = None  # (SM, byte offset) that reads one bit wrong
    holes: tuple[int, int] | None = None  # [start, end] of dynamic sizes that fail
    leak: bool = False  # shared memory outlives a CUDA context

    @classmethod
    def parse(cls, text: str) -> SimSpec:
        """Parse a ``--simulate`` value (see SPEC_HELP); a malformed one is a UsageError naming it."""
        from dataclasses import replace

        from bisect_smem.core.sizes import parse_size

        name, *pairs = [part.strip() for part in text.split(",")]
        if name.lower().endswith(".json"):
            from bisect_smem.devices.backends.replay import parse_replay_spec

            return parse_replay_spec(text)
        profile = find_profile(name)
        if profile is None:
            raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
        keys = (*_PROFILE_KEYS, "fewer", *_VALIDATION_KEYS)
        values = spec_values(text, pairs, keys, f"a profile takes {', '.join(keys)}")
        sizes = {k: parse_size(v, f"--simulate {k}") for k, v in values.items() if k in _OVERRIDE_KEYS}
        fewer_text = values.get("fewer", "0")
        if not fewer_text.isdigit():
            raise UsageError(f"bad --simulate value {text!r}: fewer takes a whole number of blocks "
                             f"(got {fewer_text!r})")
        faults = launch_faults(values, text)
        if "optin" in sizes:
            profile = replace(profile, max_smem_per_block_optin_bytes=sizes["optin"])
        if "smem_per_sm" in sizes:
            profile = replace(profile, smem_per_sm_bytes=sizes["smem_per_sm"])
        return cls(profile, reserved_override=sizes.get("reserved"), text=text, fewer_blocks=int(fewer_text),
                   **faults, **_validation_faults(values, text))

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """A simulated device loads no compiled files."""
        return None

    @property
    def needs_isolation(self) -> bool:
        """Sticky and hanging faults end a process, as on a real GPU."""
        return self.sticky_bytes is not None or self.hang_bytes is not None

    @property
    def reserved_bytes(self) -> int:
        if self.reserved_override is not None:
            return self.reserved_override
        if self.profile.reserved_smem_per_block_bytes is not None:
            return self.profile.reserved_smem_per_block_bytes
        return default_reserved_bytes(self.profile.compute_capability)


def spec_values(text: str, pairs: Sequence[str], keys: Sequence[str], takes: str) -> dict[str, str]:
    """The KEY=VALUE pairs of a ``--simulate`` value by key; a pair that is not KEY=VALUE with a KEY in
    ``keys``, or a key given twice, is a UsageError (``takes`` says what is accepted)."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in keys or not value:
            raise UsageError(f"bad --simulate value {text!r}: {pair!r} is not KEY=VALUE: {takes}")
        if key in values:
            raise UsageError(f"bad --simulate value {text!r}: {key} is given twice")
        values[key] = value
    return values


def launch_faults(values: dict[str, str], text: str) -> dict[str, Any]:
    """The flaky=, seed=, hole=, sticky= and hang= faults of a ``--simulate`` value, as SimSpec fields."""
    from bisect_smem.core.sizes import parse_size

    sizes = {k: parse_size(values[k], f"--simulate {k}") for k in _FAULT_SIZE_KEYS if k in values}
    try:
        flaky = float(values.get("flaky", 0))
        seed = int(values.get("seed", 0))
    except ValueError:
        raise UsageError(f"bad --simulate value {text!r}: flaky takes a probability, seed a whole number") from None
    if not 0 <= flaky <= 1:
        raise UsageError(f"bad --simulate value {text!r}: flaky must be in 0..1 (got {flaky})")
    return {"flaky": flaky, "seed": seed, "hole_bytes": sizes.get("hole"), "sticky_bytes": sizes.get("sticky"),
            "hang_bytes": sizes.get("hang")}


def leftover_file(nonce: int) -> Path:
    """Where a leaking simulated device keeps what a context left in shared memory after the context ends:
    the state of the device, which outlives processes as the real one does."""
    return Path(tempfile.gettempdir()) / f"bisect-smem-sim-{os.getuid()}" / f"leftover-{nonce:016x}.json"


def _validation_faults(values: dict[str, str], text: str) -> dict[str, Any]:
    """The bitflip=, holes= and leak= faults of a ``--simulate`` value."""
    from bisect_smem.core.sizes import parse_size

    faults: dict[str, Any] = {}
    if "bitflip" in values:
        sm, sep, offset = values["bitflip"].partition(":")
        if not sep or not sm.strip().isdigit():
            raise UsageError(f"bad --simulate value {text!r}: bitflip takes SM:OFFSET, like 5:1000 "
                             f"(got {values['bitflip']!r})")
        faults["bitflip"] = (int(sm), parse_size(offset, "--simulate bitflip offset"))
    if "holes" in values:
        start, sep, end = values["holes"].partition("-")
        if not sep:
            raise UsageError(f"bad --simulate value {text!r}: holes takes START-END, like 1024-4096 "
                             f"(got {values['holes']!r})")
        low, high = parse_size(start, "--simulate holes start"), parse_size(end, "--simulate holes end")
        if low > high:
            raise UsageError(f"bad --simulate value {text!r}: holes START must be <= END (got {low}-{high})")
        faults["holes"] = (low, high)
    if "leak" in values:
        if values["leak"] not in ("yes", "no"):
            raise UsageError(f"bad --simulate value {text!r}: leak takes yes or no (got {values['leak']!r})")
        faults["leak"] = values["leak"] == "yes"
    return faults


class SimBackend:
    """Simulated devices, one per spec."""

    name = "sim"
    supported_steps: tuple[str, ...] | None = None

    def __init__(self, specs: tuple[SimSpec, ...]) -> None:
        self.specs = specs

    def is_available(self) -> bool:
        return bool(self.specs)

    def unavailable_reason(self) -> str:
        return "" if self.specs else "no simulated device was given (--simulate PROFILE)"

    def device_count(self) -> int:
        return len(self.specs)

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """A simulated device loads no compiled files."""
        return None

    @property
    def needs_isolation(self) -> bool:
        """Only sticky and hanging faults need worker processes; a plain simulated device runs inline."""
        return any(spec.needs_isolation for spec in self.specs)

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> SimSession:
        spec = self.specs[index]
        if spec.replay is not None:
            from bisect_smem.devices.backends.replay import ReplaySession

            return ReplaySession(index, spec, static_sizes)
        return SimSession(index, spec, static_sizes)


class SimSession:
    """One simulated device with its per-function attribute state."""

    def __init__(self, index: int, spec: SimSpec, static_sizes: tuple[int, ...]) -> None:
        too_big = [s for s in static_sizes if s > STATIC_SMEM_COMPILE_CAP_BYTES]
        if too_big:
            raise KernelCompileError(
                f"static shared memory {too_big[0]} B exceeds the compile-time cap of "
                f"{STATIC_SMEM_COMPILE_CAP_BYTES} B",
                f"ptxas error: uses too much shared data ({too_big[0]:#x} bytes, 0xc000 max)")
        self.index = index
        self.spec = spec
        self.profile = spec.profile
        self._max_dynamic: dict[ProbeKernel, int] = {}
        self._random = random.Random(spec.seed)
        self._poisoned = False
        self._residue: dict[int, tuple[int, int]] = {}  # SM -> (nonce, words) of the last leftover writer

    def identity(self) -> DeviceIdentity:
        name = f"Simulated {self.profile.key} ({self.profile.example_parts})"
        return DeviceIdentity(index=self.index, name=name, compute_capability=self.profile.compute_capability,
                              pci_bus_id=f"SIM:{self.index:02x}", extra=DeviceContext(profile=self.profile.key))

    def driver_attributes(self) -> dict[int, int | None]:
        p = self.profile
        a = DriverAttribute
        return {
            a.MAX_SHARED_MEMORY_PER_BLOCK: DEFAULT_SMEM_PER_BLOCK_BYTES,
            a.MULTIPROCESSOR_COUNT: p.multiprocessor_count,
            a.MAX_THREADS_PER_MULTIPROCESSOR: p.max_threads_per_sm,
            a.COMPUTE_CAPABILITY_MAJOR: p.compute_capability[0],
            a.COMPUTE_CAPABILITY_MINOR: p.compute_capability[1],
            a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: p.smem_per_sm_bytes,
            a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: p.max_smem_per_block_optin_bytes,
            a.MAX_BLOCKS_PER_MULTIPROCESSOR: p.max_blocks_per_sm,
            a.RESERVED_SHARED_MEMORY_PER_BLOCK: self.spec.reserved_bytes,
            a.CLUSTER_LAUNCH: int(p.cluster_launch),
        }

    def runtime_attributes(self) -> dict[str, int | None]:
        by_id = self.driver_attributes()
        return {prop: by_id[attr_id] for attr_id, _, prop in attributes.DEVICE_ATTRIBUTES}

    def nvml_info(self) -> NvmlInfo:
        return NvmlInfo(driver_version="simulated", uuid=f"SIM-{self.profile.key}-{self.index}",
                        pci_bus_id=f"SIM:{self.index:02x}", virtualization_mode="none", mig_mode="disabled",
                        name=self.identity().name)

    @staticmethod
    def _static_footprint(kernel: ProbeKernel) -> int:
        return static_footprint(kernel.static_bytes)

    def _limit(self, kernel: ProbeKernel) -> int:
        default = max(DEFAULT_SMEM_PER_BLOCK_BYTES - kernel.static_bytes, 0)
        return self._max_dynamic.get(kernel, default)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)")
        if nbytes < 0 or nbytes + self._static_footprint(kernel) > self.profile.max_smem_per_block_optin_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument")
        self._max_dynamic[kernel] = nbytes
        return LaunchOutcome(Outcome.OK)

    def _fault(self, dynamic_bytes: int) -> LaunchOutcome | None:
        """The injected fault this launch hits, if any."""
        spec = self.spec
        if self._poisoned or (spec.sticky_bytes is not None and dynamic_bytes >= spec.sticky_bytes):
            self._poisoned = True
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                                                          "was encountered (simulated)")
        if spec.hang_bytes is not None and dynamic_bytes >= spec.hang_bytes:
            while True:  # never returns, as a hung kernel: only the runner's timeout ends it
                time.sleep(3600)
        if spec.holes is not None and spec.holes[0] <= dynamic_bytes <= spec.holes[1]:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument (simulated holes)")
        if spec.hole_bytes is not None and dynamic_bytes == spec.hole_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument (simulated hole)")
        return None

    def _flaky(self, dynamic_bytes: int, limit: int, outcome: LaunchOutcome, registers: SmemRegisters | None,
               total: int) -> LaunchOutcome:
        """Near a limit, answer wrongly with probability ``flaky``."""
        granule = self.profile.allocation_granularity_bytes
        if self.spec.flaky and abs(dynamic_bytes - limit) <= granule and self._random.random() < self.spec.flaky:
            if outcome.ok:
                return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument (flaky)")
            return LaunchOutcome(Outcome.OK, "flaky", registers, total)
        return outcome

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        fault = self._fault(dynamic_bytes)
        if fault is not None:
            return fault
        total = dynamic_bytes + kernel.static_bytes
        hardware = self.profile.max_smem_per_block_optin_bytes - self._static_footprint(kernel)
        limit = min(self._limit(kernel), hardware)
        # Flakiness lives near the kernel's real ceiling, not near whatever the attribute was just set to.
        ceiling = hardware if kernel.opt_in else min(DEFAULT_SMEM_PER_BLOCK_BYTES - kernel.static_bytes, hardware)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > limit:
            return self._flaky(dynamic_bytes, ceiling,
                               LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument"),
                               self._registers(kernel, dynamic_bytes), total)
        base = self.spec.reserved_bytes + self._static_footprint(kernel)
        ok = LaunchOutcome(Outcome.OK, registers=self._registers(kernel, dynamic_bytes), bytes_verified=total,
                           dynamic_base_offset_bytes=base)
        return self._flaky(dynamic_bytes, ceiling, ok, ok.registers, total)

    def _registers(self, kernel: ProbeKernel, dynamic_bytes: int) -> SmemRegisters:
        if not has_smem_registers(self.profile.compute_capability):
            return SmemRegisters()
        granule = self.profile.allocation_granularity_bytes
        used = kernel.static_bytes + dynamic_bytes
        reserved = self.spec.reserved_bytes
        return SmemRegisters(
            dynamic_smem_size=dynamic_bytes,
            total_smem_size=round_up(used, granule),
            reserved_smem_offset_begin=0,
            reserved_smem_offset_cap=reserved,
            aggr_smem_size=reserved + used if has_aggr_register(self.profile.compute_capability) else None,
        )

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        """What one block may have beside its static data and reserved window, capped by the attribute."""
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return None
        footprint = self._static_footprint(kernel)
        hardware = min(self.profile.max_smem_per_block_optin_bytes,
                       self.profile.smem_per_sm_bytes - self.spec.reserved_bytes) - footprint
        return max(min(self._limit(kernel), hardware), 0)

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        p = self.profile
        if self._poisoned:
            return ResidencyOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)")
        if dynamic_bytes > p.max_smem_per_block_optin_bytes or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return ResidencyOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument")
        footprint = self.footprint(dynamic_bytes)
        capacity = self.carveout_capacity(carveout_percent, footprint)
        blocks, _ = blocks_per_sm(footprint, threads, capacity, p.max_blocks_per_sm, p.max_threads_per_sm)
        held = max(blocks - self.spec.fewer_blocks, 1) if blocks else blocks
        return ResidencyOutcome(Outcome.OK, "", held, held, blocks)

    def footprint(self, dynamic_bytes: int) -> int:
        """Shared memory one block takes on its SM: the request in whole granules, plus the reserved window."""
        return block_footprint(dynamic_bytes, self.profile.allocation_granularity_bytes, self.spec.reserved_bytes)

    def carveout_capacity(self, percent: int | None, footprint: int) -> int:
        """The documented rule: the percentage of the per-SM capacity, rounded up to the next supported
        carveout, but never less than one block needs."""
        p = self.profile
        if percent is None or percent < 0 or not p.carveout_kib:
            return p.smem_per_sm_bytes
        sizes = sorted(k * KIB for k in p.carveout_kib)
        wanted = max(ceil_div(percent * p.smem_per_sm_bytes, 100), footprint)
        return next((s for s in sizes if s >= wanted), sizes[-1])

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        return [self.residency(dynamic_bytes, threads, hold_ns, p) for p in percents]

    def inject_illegal_access(self) -> None:
        """Test only: poison the simulated context, as a real illegal access would."""
        self._poisoned = True

    def cluster_support(self) -> str | None:
        if not self.profile.cluster_launch:
            return f"thread block clusters need cc 9.0+ (this device: {self.profile.cc_string})"
        return None

    def _blocks_per_sm(self, dynamic_bytes: int, threads: int) -> int:
        return self.residency(dynamic_bytes, threads, 0).blocks_per_sm_min or 0

    def _gpc_sizes(self) -> list[int]:
        full, rest = divmod(self.profile.multiprocessor_count, SMS_PER_GPC)
        return [SMS_PER_GPC] * full + ([rest] if rest else [])

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        results = []
        for size in sizes:
            results.append(self.cluster_launch(dynamic_bytes, size, nonportable, threads))
            if not results[-1].launched:
                break
        return results

    def cluster_launch(self, dynamic_bytes: int, cluster_size: int, nonportable: bool,
                       threads: int) -> ClusterOutcome:
        if self._poisoned:
            return ClusterOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)")
        limit = NONPORTABLE_CLUSTER_SIZE if nonportable else PORTABLE_CLUSTER_SIZE
        if not self.profile.cluster_launch or not 1 <= cluster_size <= limit:
            return ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_INVALID_CLUSTER_SIZE")
        if dynamic_bytes > self.profile.max_smem_per_block_optin_bytes:
            return ClusterOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument")
        if self._blocks_per_sm(dynamic_bytes, threads) * max(self._gpc_sizes()) < cluster_size:
            return ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES")
        return ClusterOutcome(Outcome.OK, "", cluster_size, cluster_size * dynamic_bytes, 0, cluster_size)

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        bps = self._blocks_per_sm(dynamic_bytes, threads)
        total = sum(gpc * bps // cluster_size for gpc in self._gpc_sizes())
        return ClusterResidencyOutcome(Outcome.OK, "", min(total, clusters), total)

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        return min(NONPORTABLE_CLUSTER_SIZE, self._blocks_per_sm(dynamic_bytes, threads) * max(self._gpc_sizes()))

    def close(self) -> None:
        """End the context: shared memory keeps what was written only on a device that leaks."""
        if self.spec.leak and self._residue:
            by_nonce: dict[int, dict[int, int]] = {}
            for sm, (nonce, words) in self._residue.items():
                by_nonce.setdefault(nonce, {})[sm] = words
            for nonce, sms in by_nonce.items():
                leftover_file(nonce).parent.mkdir(parents=True, exist_ok=True)
                leftover_file(nonce).write_text(json.dumps(sms))
        self._residue.clear()
        self._max_dynamic.clear()

    def launch_many(self, kernel: ProbeKernel, sizes: Sequence[int], threads: int, *,
                    raise_limit: bool = False) -> list[LaunchOutcome]:
        return launch_each(self, kernel, sizes, threads, raise_limit=raise_limit)

    # Validation (experiments/validation.py): one block per SM; what each SM's shared memory holds is
    # modelled as the nonce of the last leftover writer there and its word count.

    def _validation_fault(self, dynamic_bytes: int, threads: int) -> LaunchOutcome | None:
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)")
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > self.profile.max_smem_per_block_optin_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument")
        return self._fault(dynamic_bytes)

    def _sms(self, blocks: int) -> list[int]:
        """The SM each block runs on: one block per SM fits at a time, so block b lands on SM b mod count."""
        return [b % self.profile.multiprocessor_count for b in range(blocks)]

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int) -> MarchOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return MarchOutcome(fault.outcome, fault.detail)
        flip_sm, flip_byte = self.spec.bitflip or (None, None)
        results = []
        for sm in self._sms(blocks):
            self._residue.pop(sm, None)  # the march overwrites the whole array
            results.append(simulate_march(sm, dynamic_bytes, seed, flip_byte if sm == flip_sm else None))
        return MarchOutcome(Outcome.OK, "", tuple(results))

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        sms = self._sms(blocks)
        for sm in sms:
            self._residue[sm] = (nonce, dynamic_bytes // 4)
        return LeftoverOutcome(Outcome.OK, "", tuple(sms), len(sms) * (dynamic_bytes // 4))

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        path = leftover_file(nonce)
        earlier = {int(sm): words for sm, words in json.loads(path.read_text()).items()} if path.is_file() else {}
        path.unlink(missing_ok=True)
        sms = self._sms(blocks)
        words = dynamic_bytes // 4
        matching = 0
        for sm in sms:
            mine = self._residue.get(sm)
            kept = mine[1] if mine is not None and mine[0] == nonce else earlier.get(sm, 0)
            matching += min(kept, words)
        return LeftoverOutcome(Outcome.OK, "", tuple(sms), len(sms) * words, matching)

    def address(self) -> DeviceAddress:
        return DeviceAddress("sim", 0, self.spec.text)
