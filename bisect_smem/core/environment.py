"""The environment variables the tool reads or sets, each named and described once: the modules that read one
import its name from here, and the man page's ENVIRONMENT section lists MEANINGS without loading those
modules."""

from __future__ import annotations

REPORT = "BISECT_SMEM_REPORT"
CACHE_DIR = "BISECT_SMEM_CACHE_DIR"
CUPTI_LIBRARY = "BISECT_SMEM_CUPTI_LIBRARY"
COLLECTOR = "BISECT_SMEM_COLLECTOR"
TRACE_DIR = "BISECT_SMEM_TRACE_DIR"
TRACE_NOTIFY = "BISECT_SMEM_TRACE_NOTIFY"
TIMELINE = "BISECT_SMEM_TIMELINE"
INJECTION = "CUDA_INJECTION64_PATH"

# What each one means, in the man page's words.
MEANINGS: dict[str, str] = {
    REPORT: "the report check reads when no path is given (default /var/lib/bisect-smem/report.json)",
    CACHE_DIR: "where compiled probe kernels are kept (default $CUPY_CACHE_DIR/bisect_smem, else "
               "~/.cupy/kernel_cache/bisect_smem)",
    CUPTI_LIBRARY: "the libcupti that trace's collector loads, before the nvidia-cuda-cupti wheels and the toolkit's",
    COLLECTOR: "python: trace injects the ctypes collector (Python commands only) even where a C compiler could "
               "build the C one",
    TRACE_DIR: "set by trace for the collector in the command's processes: the folder the JSON lines go to (not "
               "for users to set)",
    TRACE_NOTIFY: "set by trace for the collector: the socket it reports its start on (not for users to set)",
    TIMELINE: "FILE: every process of a run appends where its time goes (bench/bench.py reads it)",
    INJECTION: "set by trace to the collector; trace refuses to run when it is already set (another tool, such as "
               "nsys or ncu, injects itself)",
}
