"""experiments: what is measured and how a probe's outcome is read. May import core and devices.

The typed steps of a device's measurement (plan), the ceilings and static splits (measure), the
residency staircase and carveout (residency) and thread block clusters (clusters). Experiments talk to
a device only through the DeviceSession protocol of devices.backends.base.
"""
