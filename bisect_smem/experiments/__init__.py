"""experiments: what is measured and how a probe's outcome is read. May import core and devices.

One module per experiment (ceilings, residency, clusters, validation), each holding its steps; a step
runs with a StepContext (context) and reads outcomes with expect; rounds (the one probe scheduler:
searches that share rounds, each round one batch of launches); steps (the step protocol, groups of steps
run together, and assemble), config, plan (the steps per level) and measure (the step loop). Experiments talk to a
device only through the protocols of devices.backends: base's DeviceSession and the probe families of
families.py, one of which each step names (``Step.family``) for the plan to ask of a backend.
"""
