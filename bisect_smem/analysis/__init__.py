"""analysis: what the measurements mean. May import core, devices and experiments; never prints.

How one row is judged (compare), verdicts with their kinds (verdicts, integrity_verdicts), the device
report built from finished steps (device_report), cross-checks between backends (crosscheck), saved
baselines and their comparison (baseline), many hosts' reports in one view (merge), and whether a kernel
fits (fit, with the stage rules in stages and cubin/PTX reading in cubin).
"""
