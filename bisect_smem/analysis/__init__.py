"""analysis: what the measurements mean. May import core, devices and experiments; never prints.

How one row is judged (compare), verdicts with their kinds (verdicts, integrity_verdicts), the device
report built from finished steps (device_report), cross-checks between backends (crosscheck), saved
baselines and their comparison (baseline), many hosts' reports in one view (merge), the status fields
(summary), and whether a kernel fits (fit/: a library's kernel counted in its own bytes, one folder per
library, and the static shared memory read from a cubin or PTX in compiled).
"""
