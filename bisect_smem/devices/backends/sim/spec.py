"""The ``--simulate`` mini-language, parsed into a SimSpec (a DeviceModel, its faults, and the text it came
from, which another process parses again to open the same device). A malformed value is a UsageError
naming the part that is wrong.

--simulate PROFILE[,KEY=VALUE...]: a simulated device from the published table.
  faults:    flaky=P       probes within one granule of a limit answer wrongly with probability P
             hole=BYTES    a launch of exactly BYTES dynamic fails, below the ceiling
             sticky=BYTES  a launch of BYTES or more poisons the context (as an illegal address does)
             hang=BYTES    a launch of BYTES or more never returns
             seed=N        the random seed of flaky (default 0)
             bitflip=SM:OFFSET  SM number SM reads one bit of byte OFFSET of its shared memory wrong
             holes=START-END    a launch of any dynamic size from START to END (inclusive) fails
             leak=yes|no   shared memory keeps its data when a CUDA context ends (default no)
  overrides: optin=BYTES, smem_per_sm=BYTES, reserved=BYTES (a device that differs from its table row;
             optin + reserved must fit smem_per_sm, as on every GPU),
             fewer=N       every SM holds N fewer blocks than the occupancy API predicts
--simulate REPORT.json[,device=N,FAULT...]: replay device N (default 0) of a saved report or baseline;
  it takes the faults flaky, seed, hole, sticky and hang.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.numbers import decimal, whole_number
from bisect_smem.core.profiles import find_profile, profile_names
from bisect_smem.core.sizes import parse_size
from bisect_smem.devices.backends.sim.model import DeviceModel, load_replay

FAULT_KEYS = ("flaky", "seed", "hole", "sticky", "hang")  # the faults a replayed report takes too
_FAULT_SIZE_KEYS = ("hole", "sticky", "hang")
_OVERRIDE_KEYS = ("optin", "smem_per_sm", "reserved")
_VALIDATION_KEYS = ("bitflip", "holes", "leak")
PROFILE_KEYS = (*FAULT_KEYS, *_OVERRIDE_KEYS, "fewer", *_VALIDATION_KEYS)
MAX_SIZE_TEXT = 32  # longer than any byte count anyone writes


@frozen
class Faults:
    """What goes wrong on a simulated device, on purpose. Sizes are dynamic bytes."""

    flaky: float = 0.0  # near a limit, a probe answers wrongly with this probability
    seed: int = 0  # of flaky's random answers
    hole_bytes: int | None = None  # a launch of exactly this size fails
    sticky_bytes: int | None = None  # a launch of this size or more poisons the context
    hang_bytes: int | None = None  # a launch of this size or more never returns
    bitflip: tuple[int, int] | None = None  # (SM, byte offset) that reads one bit wrong
    holes: tuple[int, int] | None = None  # [start, end] of dynamic sizes that fail
    leak: bool = False  # shared memory outlives a CUDA context

    @property
    def needs_isolation(self) -> bool:
        """Sticky and hanging faults end a process, as on a real GPU."""
        return self.sticky_bytes is not None or self.hang_bytes is not None


@frozen
class SimSpec:
    """One simulated device: its model, its faults, and the ``--simulate`` text. Picklable for workers."""

    model: DeviceModel
    faults: Faults = Faults()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> SimSpec:
        """Parse a ``--simulate`` value (the module's docstring lists its keys); a malformed one is a
        UsageError naming it."""
        name, *pairs = [part.strip() for part in text.split(",")]
        if name.lower().endswith(".json"):
            return _parse_replay(text, name, pairs)
        profile = find_profile(name)
        if profile is None and (os.sep in name or os.path.lexists(name)):
            # No profile name is a path: the file it names is read, which says what is wrong with it
            # (a device such as /dev/zero, a link loop) rather than that no profile is called that.
            return _parse_replay(text, name, pairs)
        if profile is None:
            raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
        values = spec_values(text, pairs, PROFILE_KEYS, f"a profile takes {', '.join(PROFILE_KEYS)}")
        sizes = {k: spec_size(v, f"--simulate {k}") for k, v in values.items() if k in _OVERRIDE_KEYS}
        fewer = spec_number(values.get("fewer", "0"), text, "fewer takes a whole number of blocks")
        faults = launch_faults(values, text)
        model = DeviceModel.from_profile(profile, sizes.get("optin"), sizes.get("smem_per_sm"), sizes.get("reserved"),
                                         fewer)
        _consistent(model, text)
        return cls(model, Faults(**faults, **_validation_faults(values, text, model)), text)


def _consistent(model: DeviceModel, text: str) -> None:
    """Overrides that make a device no GPU can be are refused: a block's opt-in limit and its reservation
    come out of one SM's shared memory (on every GPU published, opt-in = per SM - reserved); the simulated
    launch and occupancy API would otherwise answer from different limits."""
    if model.optin_bytes + model.reserved_bytes > model.smem_per_sm_bytes:
        raise UsageError(f"bad --simulate value {text!r}: an opt-in limit of {model.optin_bytes} B and "
                         f"{model.reserved_bytes} B reserved do not fit the {model.smem_per_sm_bytes} B of one SM "
                         "(give smem_per_sm= too)")


def _parse_replay(text: str, path: str, pairs: list[str]) -> SimSpec:
    """``REPORT.json[,device=N,flaky=P,...]``: a SimSpec that replays a saved device (faults allowed)."""
    values = spec_values(text, pairs, ("device", *FAULT_KEYS),
                         f"a replayed report takes device=N and the faults {', '.join(FAULT_KEYS)}")
    device = spec_number(values.get("device", "0"), text, "device takes a whole number")
    faults = launch_faults(values, text)
    return SimSpec(load_replay(path, device), Faults(**faults), text)


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


def spec_size(value: str, what: str) -> int:
    """A byte count of a ``--simulate`` key (core/sizes.py), refused before it is read when it is longer
    than any byte count is written."""
    if len(value) > MAX_SIZE_TEXT:
        raise UsageError(f"{what} must be a byte count like 110592, 108KiB or 99K (got {value[:20]!r}... of "
                         f"{len(value)} characters)")
    return parse_size(value, what)


def spec_number(value: str, text: str, takes: str) -> int:
    """A whole number of a ``--simulate`` key in ASCII digits (core/numbers.py); ``takes`` says what it is."""
    try:
        return whole_number(value, "the value")
    except UsageError:
        raise UsageError(f"bad --simulate value {text!r}: {takes} (got {value[:40]!r})") from None


def launch_faults(values: dict[str, str], text: str) -> dict[str, Any]:
    """The flaky=, seed=, hole=, sticky= and hang= faults of a ``--simulate`` value, as Faults fields."""
    sizes = {k: spec_size(values[k], f"--simulate {k}") for k in _FAULT_SIZE_KEYS if k in values}
    try:
        flaky = decimal(values.get("flaky", "0"), "flaky")
        seed = whole_number(values.get("seed", "0"), "seed")
    except UsageError:
        raise UsageError(f"bad --simulate value {text!r}: flaky takes a probability, seed a whole number") from None
    if not 0 <= flaky <= 1:
        raise UsageError(f"bad --simulate value {text!r}: flaky must be in 0..1 (got {flaky})")
    return {"flaky": flaky, "seed": seed, "hole_bytes": sizes.get("hole"), "sticky_bytes": sizes.get("sticky"),
            "hang_bytes": sizes.get("hang")}


def _validation_faults(values: dict[str, str], text: str, model: DeviceModel) -> dict[str, Any]:
    """The bitflip=, holes= and leak= faults of a ``--simulate`` value (a bit flip on an SM and a byte the
    device has)."""
    faults: dict[str, Any] = {}
    if "bitflip" in values:
        sm, sep, offset = values["bitflip"].partition(":")
        if not sep:
            raise UsageError(f"bad --simulate value {text!r}: bitflip takes SM:OFFSET, like 5:1000 "
                             f"(got {values['bitflip']!r})")
        sm_id = spec_number(sm, text, "bitflip takes SM:OFFSET, like 5:1000")
        byte = spec_size(offset, "--simulate bitflip offset")
        if sm_id >= model.multiprocessor_count:
            raise UsageError(f"bad --simulate value {text!r}: bitflip SM {sm_id} does not exist "
                             f"(the device has SMs 0..{model.multiprocessor_count - 1})")
        if byte >= model.optin_bytes:
            raise UsageError(f"bad --simulate value {text!r}: bitflip byte {byte} is beyond the shared memory "
                             f"a block gets ({model.optin_bytes} B)")
        faults["bitflip"] = (sm_id, byte)
    if "holes" in values:
        start, sep, end = values["holes"].partition("-")
        if not sep:
            raise UsageError(f"bad --simulate value {text!r}: holes takes START-END, like 1024-4096 "
                             f"(got {values['holes']!r})")
        low, high = spec_size(start, "--simulate holes start"), spec_size(end, "--simulate holes end")
        if low > high:
            raise UsageError(f"bad --simulate value {text!r}: holes START must be <= END (got {low}-{high})")
        faults["holes"] = (low, high)
    if "leak" in values:
        if values["leak"] not in ("yes", "no"):
            raise UsageError(f"bad --simulate value {text!r}: leak takes yes or no (got {values['leak']!r})")
        faults["leak"] = values["leak"] == "yes"
    return faults
