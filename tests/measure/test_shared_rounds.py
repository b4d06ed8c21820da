"""Probes that share rounds: the static splits run together measure exactly what each measures alone,
within the probe bound, in about as many synchronisations as the longest search; a fault in a shared
round is no one step's, and the restarted worker pins it on one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_smem.core.profiles import PROFILES
from bisect_smem.core.search import probe_bound
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.device_info import open_device
from bisect_smem.experiments.config import MeasureConfig
from bisect_smem.experiments.measure import DeviceMeasurement
from bisect_smem.experiments.plan import plan_steps
from tests.conftest import run_cli_json


class CountingSession:
    """A session that counts its synchronisations (each batch, each single launch) per step kind."""

    def __init__(self, inner: object) -> None:
        self.inner, self.syncs, self.kind = inner, {}, ""

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.inner, name)
        if name not in ("launch", "launch_batch", "residency", "residency_batch", "carveout_sweep"):
            return attr

        def counted(*args: object, **kwargs: object) -> object:
            self.syncs[self.kind] = self.syncs.get(self.kind, 0) + 1
            return attr(*args, **kwargs)
        return counted


def measure(spec: str, together: bool, config: MeasureConfig) -> tuple[dict, dict[str, int]]:
    session, info = open_device(SimBackend((SimSpec.parse(spec),)), 0, config.static_sizes)
    counting = CountingSession(session)
    measurement = DeviceMeasurement.for_device(counting, info, config)  # type: ignore[arg-type]
    done: dict = {}

    def starting(step: object) -> None:
        counting.kind = step.kind  # type: ignore[attr-defined]

    for _ in measurement.each_step(plan_steps(config), done, starting, lambda _step: together):
        pass
    return done, counting.syncs


SPLITS_ONLY = MeasureConfig(residency=False, carveout=False, clusters=False)


@settings(max_examples=40, deadline=None)
@given(profile=st.sampled_from(PROFILES), data=st.data())
def test_splits_run_together_measure_what_each_measures_alone(profile: object, data: st.DataObject) -> None:
    optin = profile.max_smem_per_block_optin_bytes  # type: ignore[attr-defined]
    extra = data.draw(st.sampled_from(["", f",optin={optin - 1024}", f",hole={optin // 2}",
                                       f",holes={optin // 3}-{optin // 3 + 700}"]), label="fault")
    spec = profile.key + extra  # type: ignore[attr-defined]
    shared, shared_syncs = measure(spec, True, SPLITS_ONLY)
    alone, alone_syncs = measure(spec, False, SPLITS_ONLY)
    assert list(shared) == list(alone)
    for step in shared:
        a, b = shared[step], alone[step]
        assert (a.value, a.error) == (b.value, b.error), step
        assert {n: (c.ceiling_bytes, c.probes, c.at_cap, c.unstable_range_bytes, c.non_monotone_at_bytes, c.error,
                    c.rounds) for n, c in a.searches.items()} == \
               {n: (c.ceiling_bytes, c.probes, c.at_cap, c.unstable_range_bytes, c.non_monotone_at_bytes, c.error,
                    c.rounds) for n, c in b.searches.items()}
        assert all(c.probes <= probe_bound(SPLITS_ONLY.cap_bytes) for c in a.searches.values())
    split_rounds = [c.rounds or 0 for r in shared.values() for name, c in r.searches.items()
                    if name.startswith("optin_dynamic_ceiling/")]
    assert shared_syncs["static_split"] <= max(split_rounds) + 1  # one round of footprints, then the searches
    assert alone_syncs["static_split"] >= sum(split_rounds)


@pytest.mark.parametrize("profile", ["h200", "a100", "rtx-pro-6000"])
def test_the_staircase_and_carveout_take_few_rounds(profile: str) -> None:
    config = MeasureConfig()
    _, syncs = measure(profile, True, config)
    assert syncs["residency"] <= 24 and syncs["carveout"] <= 24, syncs


def test_a_fault_in_a_shared_round_is_pinned_on_one_step_after_the_restart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200,sticky=200000", "--max-restarts", "2"], tmp_path, capsys)
    (dev,) = report["devices"]
    wheres = [e["where"] for e in dev["events"]]
    assert wheres[0] == "device 0, step static_split:0:32 and 14 more steps sharing its rounds"
    assert wheres[1:] == ["device 0, step static_split:0:32"] * 2
    assert code == 4 and "gave up after 2 restarts" in dev["error"]
    assert dev["measured"]["default_dynamic_ceiling_bytes"] == 49152
