"""The environment variables that the devices layer reads, as the command line documents them (the man
page's ENVIRONMENT): the command line imports nothing of devices, so it learns their names here."""

from __future__ import annotations

from bisect_smem.devices.collector.libcupti import OVERRIDE as CUPTI_ENV
from bisect_smem.devices.nvrtc import CACHE_ENV

__all__ = ["CACHE_ENV", "CUPTI_ENV"]
