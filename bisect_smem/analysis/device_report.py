"""A device's report from whatever steps completed: what it said, what it measured, and the verdicts.

Pure: the runner hands over the device's identity and step results; nothing here touches a device.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bisect_smem.analysis.compare import row
from bisect_smem.analysis.verdicts import build_verdicts
from bisect_smem.core.levels import DEFAULT_LEVEL
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.profiles import cc_text, profile_for_cc
from bisect_smem.core.rows import Conclusion, Family
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.experiments.steps import Done, Step, assemble


def build_report(index: int, backend: str, info: DeviceInfo | None, done: Done, events: list[dict[str, Any]],
                 error: str | None, elapsed_s: float, planned: list[Step] | None = None,
                 level: str = DEFAULT_LEVEL) -> DeviceReport:
    """The device's report; a missing step leaves its quantities None and gets an ERROR row, as does a
    step that failed. ``level`` is the level the steps were planned at."""
    if info is None:
        return DeviceReport(index, None, None, backend, events=tuple(events), error=error or "never opened",
                            elapsed_s=round(elapsed_s, 3))
    measured, errors = assemble(done)
    measured = replace(measured, timings_s={"open": info.open_s, **measured.timings_s}, level=level)
    cc = info.identity.compute_capability
    verdicts = build_verdicts(info.reported, measured, profile_for_cc(cc), cc_text(cc))
    failed = [row(f"step {r.step.key}", None, None, None, Conclusion.ERROR, [r.error], family=Family.STEP)
              for r in done.values() if r.error]
    missing = [row(f"step {step.key}", None, None, None, Conclusion.ERROR, ["not measured: the device was given up"],
                   family=Family.STEP) for step in planned or () if step not in done]
    context = replace(info.identity.extra, pci_bus_id=info.identity.pci_bus_id).with_nvml(info.nvml)
    if context.replayed_error:  # a replay keeps the error of the device it replays
        errors = [*errors, f"the replayed device's error: {context.replayed_error}"]
    return DeviceReport(index=index, name=info.identity.name, compute_capability=cc_text(cc), backend=backend,
                        context=context, reported=info.reported, measured=measured,
                        verdicts=(*verdicts, *failed, *missing), events=tuple(events),
                        error="; ".join([*errors, *([error] if error else [])]) or None,
                        elapsed_s=round(elapsed_s, 3))
