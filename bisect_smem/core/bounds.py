"""The ranges a device's integers can fall in, shared by the declarations of quantities (core/quantities.py)
and records (core/records.py). They are generous: they refuse what is impossible, not what is unusual."""

from __future__ import annotations

from bisect_smem.core.hardware import MAX_THREADS_PER_BLOCK

Bounds = tuple[int, int]  # inclusive
MAX_SMEM_BYTES = 1 << 24  # 16 MiB: 70 times the largest per-SM capacity published so far (228 KiB)
MAX_SMS = 4096  # %smid is below this on every GPU so far
MAX_COUNT = 1 << 24  # blocks, clusters, probes, launches
MAX_WORDS = 1 << 40  # words read over every SM
BYTES, SOME_BYTES = (0, MAX_SMEM_BYTES), (1, MAX_SMEM_BYTES)
# Every CUDA device since cc 2.0 offers a block 48 KiB; a simulated device can be told less (optin=1K), so
# 1 KiB is the floor: an opt-in ceiling of 0 or 100 B is a broken file, not a device.
OPTIN_BYTES = (1024, MAX_SMEM_BYTES)
COUNT = (0, MAX_COUNT)
THREADS = (1, MAX_THREADS_PER_BLOCK)
SM_ID = (0, MAX_SMS - 1)
WORD = (0, 0xFFFFFFFF)
