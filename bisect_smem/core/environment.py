"""The environment variables the tool reads or sets, each named once: the modules that read one import its
name from here, and the man page's ENVIRONMENT section lists them from here without loading those modules."""

from __future__ import annotations

REPORT = "BISECT_SMEM_REPORT"  # the report check reads when no path is given
CACHE_DIR = "BISECT_SMEM_CACHE_DIR"  # where compiled probe kernels are kept
CUPTI_LIBRARY = "BISECT_SMEM_CUPTI_LIBRARY"  # the libcupti trace's collector loads first
COLLECTOR = "BISECT_SMEM_COLLECTOR"  # "python": the ctypes collector even where cc builds the C one
TRACE_DIR = "BISECT_SMEM_TRACE_DIR"  # the folder each traced process writes its PID.jsonl into
TRACE_NOTIFY = "BISECT_SMEM_TRACE_NOTIFY"  # the socket a collector that cannot write tells
TIMELINE = "BISECT_SMEM_TIMELINE"  # FILE: every process of a run appends where its time goes
INJECTION = "CUDA_INJECTION64_PATH"  # CUDA loads the library it names into every process, at cuInit
