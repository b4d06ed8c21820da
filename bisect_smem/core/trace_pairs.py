"""A runtime call (cudaLaunchKernel) and the driver call it makes carry the same correlation id: they are one
launch, named after the runtime call, with the driver's request, kernel name and attributes. Launches wait here
for the record of the other domain, in bounded tables."""

from __future__ import annotations

from typing import Any

from bisect_smem.core.trace_events import LaunchKind
from bisect_smem.core.trace_layout import NO_ATTRIBUTES

# Records kept waiting for the record of the other domain with their correlation id: the driver call a runtime
# call makes is written just before it by the same thread, so only other threads' lines come between them.
PENDING_RECORDS = 4096
# A launch still to be paired: its key in the tally, its id (in decimal), and what pairing reads again (its handle, the name
# and the api it was written with, each None where it has none).
Pending = tuple[tuple[Any, ...], bytes, "str | None", "str | None", "str | None"]


class Pairs:
    """Launches by correlation id (in decimal, as the collector writes it), still to be paired: driver records
    (two generations), and runtime records that came first."""

    def __init__(self) -> None:
        self.recent: dict[bytes, Pending] = {}
        self.older: dict[bytes, Pending] = {}
        self.waiting: dict[bytes, Pending] = {}

    def pair(self, launch: Pending, correlation: bytes, is_runtime: bool) -> tuple[Pending, Pending] | None:
        """The driver and runtime launches that ``launch`` completes, or None while it waits (or never will)."""
        if is_runtime:  # its driver call was written just before it, by the same thread
            partner = self.recent.pop(correlation, None) or self.older.pop(correlation, None)
            if partner is None:
                self.waiting[correlation] = launch
                if len(self.waiting) > PENDING_RECORDS:
                    self.waiting.clear()  # runtime records whose driver call never came: kept alone
                return None
            return partner, launch
        if self.waiting and correlation in self.waiting:  # the runtime record came first
            return launch, self.waiting.pop(correlation)
        self.driver(launch, correlation)
        return None

    def driver(self, launch: Pending, correlation: bytes) -> None:
        """A driver launch no runtime record waits for: kept for the runtime record that may follow."""
        recent = self.recent
        recent[correlation] = launch
        if len(recent) > PENDING_RECORDS:  # two generations: what is older than both is paired with nothing
            self.older, self.recent = recent, {}


def named(names: dict[str, str], own: str | None, handle: str | None) -> str | None:
    """A launch's kernel name: its own (then the name of its handle in ``names``), else its handle's name."""
    if own is not None:
        if handle is not None:
            names[handle] = own
        return own
    return None if handle is None else names.get(handle)


def merged(names: dict[str, str], driver: Pending, runtime: Pending) -> tuple[Any, ...]:
    """The key of a driver launch made by a runtime call: the call the program made and the result it saw, the
    driver's request, kernel name and attributes (the runtime's where the driver's record has none)."""
    key, _, handle, own, _ = driver
    runtime_key, _, runtime_handle, runtime_own, runtime_api = runtime
    result, attributes = runtime_key[7], key[11]
    if result and attributes == NO_ATTRIBUTES:  # a host stub has none; the driver's record has the kernel's
        attributes = runtime_key[11]
    return (runtime_api or key[0], named(names, own, handle) or named(names, runtime_own, runtime_handle),
            *key[2:7], result, "runtime", key[9], LaunchKind.LAUNCH.value, attributes, 0)
