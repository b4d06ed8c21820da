"""The host line of a report's header: the hypervisor, DMI vendor and container that devices/host.py read,
as one line (text and markdown both show it)."""

from __future__ import annotations

from typing import Any


def describe(context: dict[str, Any]) -> str:
    """One line for the report header."""
    flag = context.get("cpu_hypervisor_flag")
    vm = {True: "yes", False: "no", None: "unknown"}[flag]
    dmi = " ".join(v for v in (context.get("dmi_sys_vendor"), context.get("dmi_product_name")) if v) or "unknown"
    return f"hypervisor {vm} | DMI {dmi} | container {context.get('container') or 'none'}"
