"""analysis: what the measurements mean. May import core, devices and experiments; never prints.

Verdicts with their kinds (verdicts), the device report built from finished steps (device_report),
cross-checks between backends (crosscheck), saved baselines and their comparison (baseline), many
hosts' reports in one view (merge), and whether a kernel fits (fit, with cubin/PTX reading in cubin).
"""
