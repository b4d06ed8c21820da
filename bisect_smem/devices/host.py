"""The host around the GPU: hypervisor, DMI vendor and container, which explain many differences.

Read from /proc and /sys; every field is None where it cannot be read (another OS, no permission).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace").strip() or None
    except OSError:
        return None


def cpu_hypervisor_flag(cpuinfo: str | None) -> bool | None:
    """True when the CPU reports the ``hypervisor`` flag (running in a VM)."""
    if cpuinfo is None:
        return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return "hypervisor" in line.split(":", 1)[-1].split()
    return None


def container_kind(root: str = "/", environ: dict[str, str] | None = None) -> str | None:
    """docker, podman, kubernetes or another container runtime named by cgroups, else None."""
    env = os.environ if environ is None else environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if Path(root, ".dockerenv").exists():
        return "docker"
    if Path(root, "run/.containerenv").exists():
        return "podman"
    cgroup = _read(str(Path(root, "proc/1/cgroup"))) or ""
    for marker in ("kubepods", "docker", "containerd", "lxc"):
        if marker in cgroup:
            return marker
    return None


def host_context() -> dict[str, Any]:
    """Where the GPU lives: hypervisor flag, DMI vendor and product, container; None where unknown."""
    return {
        "cpu_hypervisor_flag": cpu_hypervisor_flag(_read("/proc/cpuinfo")),
        "dmi_sys_vendor": _read("/sys/class/dmi/id/sys_vendor"),
        "dmi_product_name": _read("/sys/class/dmi/id/product_name"),
        "container": container_kind(),
    }
