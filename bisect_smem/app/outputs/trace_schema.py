"""The schema of ``bisect-smem trace --json``'s summary (``bisect_smem/trace/v2``), generated from the records
the summary is made of (app/render/trace.py's TraceSummary and what it holds), as the other schemas are from
theirs; FIELDS adds what the annotations cannot say: the words a field takes, its least value, its meaning.
Every key is always written (null where unknown), so every one is required. Within a version fields are only
ever added; v2 made identical requests one entry with a count (v1 had one entry per record), added graph
kinds and refusal causes."""

from __future__ import annotations

from typing import Any

from bisect_smem.analysis.trace import Cause
from bisect_smem.app.render.trace import TRACE_SCHEMA, TraceSummary, skip_kind
from bisect_smem.core.json_schema import generate
from bisect_smem.core.trace_events import LaunchKind, Skip

TITLE = "bisect-smem trace summary"
FIELDS: dict[str, dict[str, Any]] = {
    "TraceSummary.schema": {"const": TRACE_SCHEMA},
    "TraceSummary.processes": {"minimum": 0, "description": "processes the collector was loaded into"},
    "TraceSummary.cupti_libraries": {"description": "the libcupti files the processes used"},
    "TraceSummary.kernels": {"minimum": 0},
    "TraceSummary.limits": {"description": "the GPU the command ran on, whose limits explain each request; null "
                                           "where none was known"},
    "TraceSummary.torn_lines": {"minimum": 0, "description": "lines cut short by a process killed while writing"},
    "TraceSummary.past_table": {"description": "launches the collector counted past its table of configurations: "
                                               "their requests were not recorded"},
    "TraceSummary.unwritable": {"description": "processes whose collector could not write its trace"},
    "TraceSummary.skipped": {"description": "lines and files of the trace that could not be read, by kind"},
    "PastTableKernel.kernel": {"description": "mangled; null: launches past both of the collector's tables"},
    "PastTableKernel.count": {"minimum": 1},
    "PastTableKernel.processes": {"minimum": 1},
    "SkippedLines.kind": {"enum": [skip_kind(kind) for kind in Skip]},
    "SkippedLines.count": {"minimum": 1},
    "SkippedLines.first": {"description": "the file (and line) of the first"},
    "Limit.kind": {"enum": ["measured", "published"]},
    "Limit.accepts_bytes": {"description": "the opt-in limit less the kernel's static data, aligned to 16 B"},
    "Limit.over_bytes": {"description": "requested - accepts: positive is over, negative is bytes to spare"},
    "RequestMade.pid": {"description": "the lowest of the processes that made it"},
    "RequestMade.kind": {"enum": ["attribute", *(kind.value for kind in LaunchKind)],
                         "description": "graph node: a node as built, counted once; graph replay: a node of an "
                                        "executable graph, counted per cuGraphLaunch; refused graph launch: the "
                                        "node of a refused cuGraphLaunch that asks the most"},
    "RequestMade.api": {"description": "the call the program made (the runtime's where it made one)"},
    "RequestMade.kernel": {"description": "the name the driver gave, mangled"},
    "RequestMade.readable": {"description": "the name demangled, whole"},
    "RequestMade.requested_bytes": {"description": "MaxDynamicSharedMemorySize asked, or the launch's dynamic "
                                                   "shared memory"},
    "RequestMade.count": {"minimum": 0, "description": "identical requests made (a graph replay: its launches; 0 "
                                                       "where it was never launched)"},
    "RequestMade.processes": {"minimum": 0},
    "RequestMade.fit": {"description": "what fit's library rules (CUTLASS, Triton) say of the kernel its name "
                                       "describes, its lines joined by '; '"},
    "RequestMade.cause": {"enum": [*(cause.value for cause in Cause), None],
                          "description": "why a refused request was refused, as far as the records tell; null "
                                         "where it was not refused"},
    "RequestMade.kernel_limit_bytes": {"description": "the kernel's MaxDynamicSharedMemorySize at the refusal"},
    "RequestMade.max_threads": {"description": "the kernel's most threads per block at the refusal"},
    "RequestMade.registers": {"description": "registers per thread, at the refusal"},
    "RequestMade.graph_nodes": {"minimum": 0, "description": "of a refused graph launch: its kernel nodes"},
    "RequestMade.over_kernel_limit_bytes": {"minimum": 1, "description": "of a launch refused for its kernel's "
                                            "own limit (cause kernel_limit): requested - kernel_limit_bytes; "
                                            "here.fits is then true, as the GPU would take it once raised"},
    "Setting.count": {"minimum": 1},
}


def trace_schema() -> dict[str, Any]:
    """The trace summary's schema, generated from TraceSummary, every key required."""
    schema = generate(TraceSummary, TRACE_SCHEMA, TITLE, FIELDS)
    for record in (schema, *schema["$defs"].values()):
        record["required"] = list(record["properties"])
    return schema
