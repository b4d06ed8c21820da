"""The classes a probe's result falls into, and which of them say "too big" or leave the CUDA context
unusable. Plain facts: the driver's error names are mapped to these in devices/probes.py."""

from __future__ import annotations

import enum


class Outcome(enum.StrEnum):
    """The class of a probe's result. Only OK counts as success; only TOO_BIG classes mean "too big"."""

    OK = "ok"
    VERIFY_FAILED = "verify_failed"  # launched, but the pattern did not read back over every byte
    INVALID_VALUE = "invalid_value"
    OUT_OF_RESOURCES = "out_of_resources"
    NO_BINARY = "no_binary"
    CLUSTER_MISCONFIG = "cluster_misconfig"
    ILLEGAL_ADDRESS = "illegal_address"
    TIMEOUT = "timeout"
    OTHER = "other"


TOO_BIG = frozenset({Outcome.INVALID_VALUE, Outcome.OUT_OF_RESOURCES})
# After these the CUDA context is unusable: only a new process recovers.
STICKY = frozenset({Outcome.ILLEGAL_ADDRESS, Outcome.TIMEOUT})
