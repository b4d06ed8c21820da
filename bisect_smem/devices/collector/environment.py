"""What the collector in a traced process is told through its environment, and the longest trace folder it
takes (the contract of collector.c and fallback/sitecustomize.py with the tool)."""

from bisect_smem.core.environment import TRACE_DIR
from bisect_smem.core.environment import TRACE_NOTIFY as NOTIFY

__all__ = ["DIR_BYTES", "NOTIFY", "TRACE_DIR"]

DIR_BYTES = 4000  # collector.c's BSM_DIR_MAX: the folder's absolute path and its final NUL
