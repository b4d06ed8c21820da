"""A backend says what it measures by the probe families its sessions implement: every family a session
class claims is implemented whole, numba's families plan exactly the steps its list of step names did, and a
session without a family gives the report of the whole session less that family's steps."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends.families import (
    FAMILIES,
    Carveout,
    Ceilings,
    Clusters,
    FaultSeam,
    Integrity,
    Residency,
    inject_illegal_access,
    supports,
)
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.ceilings import SimCeilings
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.backends.table import get_backend
from bisect_smem.devices.probes import Outcome, ProbeKernel
from bisect_smem.experiments.config import MeasureConfig
from bisect_smem.experiments.plan import plan_steps
from tests.conftest import run_cli_json

# The step kinds numba_backend listed as the ones it measured, before a backend said so by its families.
NUMBA_STEP_KINDS = ("default_ceiling", "attribute_accept_ceiling", "static_split", "block_registers", "residency")
# What every session answers beside its families (base.DeviceSession).
CORE = ("identity", "driver_attributes", "runtime_attributes", "nvml_info", "close")


def members(family: type) -> list[str]:
    """The methods a probe family's protocol declares."""
    return [name for name, value in vars(family).items() if inspect.isfunction(value) and not name.startswith("_")]


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.default, p.kind) for p in inspect.signature(function).parameters.values()]


def unimplemented(cls: type) -> list[str]:
    """Each method of a family ``cls`` claims that it leaves to the protocol's empty body, or implements
    with other parameters than the protocol's."""
    problems = []
    for family in FAMILIES:
        if not supports(cls, family):
            continue
        for name in members(family):
            owner = next(k for k in cls.__mro__ if name in vars(k))
            if owner in FAMILIES:
                problems.append(f"{cls.__name__}.{name}: claimed by {family.__name__}, not implemented")
            elif _parameters(getattr(cls, name)) != _parameters(getattr(family, name)):
                problems.append(f"{cls.__name__}.{name}: not the parameters of {family.__name__}.{name}")
    return problems


@pytest.mark.parametrize("backend", ["sim", "cupy", "numba"])
def test_every_family_a_session_claims_is_implemented(backend: str) -> None:
    # Naming the backends imports their modules, not CuPy or numba: the classes are read, never opened.
    assert unimplemented(get_backend(backend).session_type) == []


def test_a_family_claimed_and_left_unimplemented_is_found() -> None:
    class ClaimsClusters(SimCeilings, Clusters):
        """Claims clusters, implements none of their methods."""

    class OtherParameters(SimCeilings):
        def launch(self, kernel: ProbeKernel, nbytes: int, threads: int) -> Any:  # renamed dynamic_bytes
            return None

    assert unimplemented(ClaimsClusters) == [f"ClaimsClusters.{name}: claimed by Clusters, not implemented"
                                             for name in members(Clusters)]
    assert unimplemented(OtherParameters) == ["OtherParameters.launch: not the parameters of Ceilings.launch"]


@pytest.mark.parametrize(("backend", "families"), [
    ("sim", (Ceilings, Residency, Carveout, Clusters, Integrity, FaultSeam)),
    ("cupy", (Ceilings, Residency, Carveout, Clusters, Integrity, FaultSeam)),
    ("numba", (Ceilings, Residency)),  # numba-cuda launches no clusters and sets no carveout
])
def test_what_each_backend_measures(backend: str, families: tuple[type, ...]) -> None:
    session_type = get_backend(backend).session_type
    assert tuple(f for f in FAMILIES if supports(session_type, f)) == families


def test_supports_asks_only_about_probe_families() -> None:
    with pytest.raises(ValueError, match="not a probe family"):
        supports(get_backend("sim").session_type, SimSpec)


CONFIGS = [MeasureConfig(level=level) for level in ("quick", "standard", "full")] + [
    MeasureConfig(level="full", residency=False, carveout=False, clusters=False),
    MeasureConfig(static_sizes=(0, 1024), threads=(128,), carveout=False)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.level}-{c.residency:d}{c.carveout:d}{c.clusters:d}"
                         f"-{len(c.static_sizes)}x{len(c.threads)}")
def test_numba_plans_the_steps_its_list_named(config: MeasureConfig) -> None:
    planned = [step.key for step in plan_steps(config, get_backend("numba").session_type)]
    assert planned == [step.key for step in plan_steps(config) if step.kind in NUMBA_STEP_KINDS]
    assert planned and "default_ceiling" in planned
    # The simulator, like CuPy, implements every family: nothing is left out.
    assert plan_steps(config, get_backend("sim").session_type) == plan_steps(config)


def restricted(*families: type) -> type:
    """A session class with only ``families`` (and the core), each method handed to a whole session."""
    def forward(name: str) -> Callable[..., Any]:
        return lambda self, *args, **kwargs: getattr(self.inner, name)(*args, **kwargs)

    def init(self: Any, inner: object) -> None:
        self.inner = inner

    names = [*CORE, *(name for family in families for name in members(family))]
    return type("Restricted", (), {"__init__": init, **{name: forward(name) for name in names}})


def test_a_session_without_a_family_gives_the_rest_of_the_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--simulate", "h200", "--level", "full"]
    _, whole = run_cli_json(args, tmp_path, capsys, "whole.json")
    session_type, real_open = restricted(Ceilings, Residency), SimBackend.open
    monkeypatch.setattr(SimBackend, "session_type", session_type)
    monkeypatch.setattr(SimBackend, "open", lambda self, *a, **k: session_type(real_open(self, *a, **k)))
    code, part = run_cli_json(args, tmp_path, capsys, "part.json")
    (w,), (p,) = whole["devices"], part["devices"]
    assert code == 0 and p["error"] is None
    # What the two families measure is the whole session's, row for row and quantity for quantity ...
    kept = {row["quantity"] for row in p["verdicts"]}
    assert p["verdicts"] == [row for row in w["verdicts"] if row["quantity"] in kept]
    for name in ("default_dynamic_ceiling_bytes", "optin_dynamic_ceiling_bytes", "static_splits", "residency",
                 "smem_per_sm_bytes", "reserved_bytes", "allocation_granularity_bytes"):
        assert p["measured"][name] == w["measured"][name] is not None, name
    # ... and the steps of the families it lacks were never run: nothing measured, no row.
    assert not any(p["measured"][name] for name in ("carveout", "clusters", "march", "granule_sweep", "leftovers"))
    assert all(w["measured"][name] for name in ("carveout", "clusters", "march", "granule_sweep", "leftovers"))
    assert set(p["measured"]["timings_s"]) == set(w["measured"]["timings_s"]) - {
        "carveout", "clusters", "sm_march", "granule_sweep", "leftovers"}
    assert len(kept) < len({row["quantity"] for row in w["verdicts"]})


def test_a_fault_is_injected_only_through_a_fault_seam() -> None:
    session = get_backend("sim", ("h200",)).open(0, (0,))
    inject_illegal_access(session, "sim")
    assert session.launch(ProbeKernel(0, False), 1024, 128).outcome is Outcome.ILLEGAL_ADDRESS
    with pytest.raises(UsageError, match="^--inject-fault needs a backend with a faulting probe: the numba backend has none"):
        inject_illegal_access(restricted(Ceilings, Residency)(session), "numba")
