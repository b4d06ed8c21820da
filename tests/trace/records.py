"""Collector records written by hand, as TRACE_FORMAT's record format 2 has them: a trace folder the reader
can be tested on without a collector, field by field as the C collector writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CUPY_KERNEL = "_Z4fillPfi"  # a CuPy RawKernel's name, as the driver gives it


def process(pid: int, command: str = "python job.py", image: int = 1, **fields: Any) -> dict[str, Any]:
    """The first line of a process image's file."""
    return {"event": "process", "format": 2, "image": image, "pid": pid, "ppid": 1, "collector": "c",
            "cupti_library": "/usr/lib/libcupti.so.13", "cupti_found": "already loaded", "untraced": None,
            "command": command, **fields}


def launch(launch_id: int, dynamic_bytes: int, result: int = 0, name: str | None = CUPY_KERNEL,
           block: tuple[int, int, int] = (128, 1, 1), correlation: int | None = None, **fields: Any) -> dict[str, Any]:
    """A driver launch line; a refused one carries the kernel's attributes in ``fields`` (max_dynamic_bytes,
    max_threads, registers) as the collector reads them at the refusal."""
    record = {"event": "launch", "id": launch_id, "api": "cuLaunchKernel", "domain": "driver",
              "correlation": launch_id if correlation is None else correlation, "grid": [1, 1, 1],
              "block": list(block), "cluster": [0, 0, 0], "dynamic_bytes": dynamic_bytes, "static_bytes": 0,
              "result": result, "captured": False, "handle": "0x5555000010", **fields}
    if name is not None:
        record["name"] = name
    return record


def refused_attributes(max_dynamic_bytes: int = 49152, max_threads: int = 1024, registers: int = 32) -> dict[str, int]:
    """A kernel's attributes at a refused launch: by default one that never raised its limit."""
    return {"max_dynamic_bytes": max_dynamic_bytes, "max_threads": max_threads, "registers": registers}


def attribute(value: int, correlation: int, name: str = "_Z4sdpav", result: int = 0) -> dict[str, Any]:
    """cuFuncSetAttribute(MaxDynamicSharedMemorySize, value)."""
    return {"event": "attribute", "api": "cuFuncSetAttribute", "domain": "driver", "correlation": correlation,
            "attribute": 8, "value": value, "result": result, "static_bytes": 0, "handle": "0x5555000020",
            "name": name}


def write(folder: Path, name: str, lines: list[dict[str, Any] | bytes]) -> Path:
    """``folder/name`` holding ``lines`` (a dict as the collector writes it, bytes as they are), each ended
    by a newline."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
                              for line in lines))
    return path
