"""What the collector in a traced process is told through its environment, and the longest trace folder it
takes (the contract of collector.c and fallback/sitecustomize.py with the tool)."""

TRACE_DIR = "BISECT_SMEM_TRACE_DIR"  # the folder each process writes its PID.jsonl into
NOTIFY = "BISECT_SMEM_TRACE_NOTIFY"  # the abstract unix datagram socket a collector that cannot write tells
DIR_BYTES = 4000  # collector.c's BSM_DIR_MAX: the folder's absolute path and its final NUL
