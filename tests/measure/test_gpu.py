"""The real run on a GPU (marker `gpu`: skipped with the reason where no device is visible)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict]:
    out = tmp_path_factory.mktemp("gpu") / "report.json"
    code = cli.main(["--json", str(out), "--quiet", "--device", "0"])
    return code, json.loads(out.read_text())


def test_measured_ceilings_equal_the_reported_attributes(gpu_report: tuple[int, dict]) -> None:
    _, report = gpu_report
    dev = report["devices"][0]
    assert dev["error"] is None
    driver, m = dev["reported"]["driver"], dev["measured"]
    assert m["default_dynamic_ceiling_bytes"] == driver["max_shared_memory_per_block_bytes"]
    assert m["optin_dynamic_ceiling_bytes"] == driver["max_shared_memory_per_block_optin_bytes"]
    assert m["attribute_accept_ceiling_bytes"] == driver["max_shared_memory_per_block_optin_bytes"]
    if driver["reserved_shared_memory_per_block_bytes"] is not None and m["reserved_bytes"] is not None:
        assert m["reserved_bytes"] == driver["reserved_shared_memory_per_block_bytes"]
    for split in m["static_splits"]:
        assert split["dynamic_ceiling_bytes"] == (driver["max_shared_memory_per_block_optin_bytes"]
                                                  - split["static_footprint_bytes"])
        assert split["static_footprint_bytes"] >= split["static_bytes"]
    assert all(s["probes"] <= s["probe_bound"] == 26 for s in m["searches"].values()), m["searches"]


def test_exit_code_follows_the_verdicts(gpu_report: tuple[int, dict]) -> None:
    code, report = gpu_report
    verdicts = {v["verdict"] for d in report["devices"] for v in d["verdicts"]}
    assert "ERROR" not in verdicts
    assert code == (1 if "MISMATCH" in verdicts else 0)


def test_the_default_kernel_is_never_opted_in(tmp_path: Path) -> None:
    from bisect_smem.devices.backends.cupy.backend import CupySession
    from bisect_smem.devices.probes import Outcome, ProbeKernel

    session = CupySession(0, (0,))
    try:
        with pytest.raises(ValueError, match="must stay fresh"):
            session.set_max_dynamic(ProbeKernel(0, opt_in=False), 65536)
        assert session.launch(ProbeKernel(0, opt_in=False), 48 * 1024, 128).ok
        assert session.launch(ProbeKernel(0, opt_in=False), 48 * 1024 + 1, 128).outcome is Outcome.INVALID_VALUE
    finally:
        session.close()


def test_residency_staircase_is_measured_with_verdicts(gpu_report: tuple[int, dict]) -> None:
    _, report = gpu_report
    dev = report["devices"][0]
    m, driver = dev["measured"], dev["reported"]["driver"]
    staircase = [s for s in m["residency"] if s["threads"] == 32]
    assert staircase[0]["dynamic_bytes"] == 0
    blocks = [s["blocks_per_sm_min"] for s in staircase]
    assert blocks == sorted(blocks, reverse=True) and len(set(blocks)) == len(blocks) and blocks[-1] == 1
    assert m["smem_per_sm_bytes"] == driver["max_shared_memory_per_multiprocessor_bytes"]
    rows = [v for v in dev["verdicts"] if v["quantity"].startswith("blocks/SM")]
    assert len(rows) >= len(staircase) and all(v["verdict"] in ("match", "differs", "MISMATCH") for v in rows)
    assert m["timings_s"]["residency"] < 1.0
    assert [p["percent"] for p in m["carveout"]] == [-1, *range(101)]


def test_fit_uses_the_measured_local_device(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "232448", "--arch", "h200", "--json", "-", "--quiet"])
    data = json.loads(capsys.readouterr().out)
    measured = [r for r in data["results"] if r["kind"] == "measured"]
    assert measured and measured[0]["optin_limit_bytes"] == 232448
    assert code == 0 and all(r["verdict"] == "fits with opt-in" for r in data["results"])


def test_fit_stages_auto_from_the_measured_limit(capsys: pytest.CaptureFixture[str]) -> None:
    # Against Hopper's published row, where CUTLASS has a bf16 collective (before sm_90 and on sm_120 none
    # builds, which is exit 1 by design).
    code = cli.main(["fit", "--tile", "128x256x64", "--dtype", "bf16", "--stages", "auto", "--arch", "9.0",
                     "--json", "-", "--quiet"])
    results = json.loads(capsys.readouterr().out)["results"]
    measured = [r for r in results if r["kind"] == "measured"]
    assert code == 0 and measured and all(r["stages"] is not None for r in measured)
    for r in measured:
        (row,) = [p for p in results if p["kind"] == "published" and p["compute_capability"] == r["compute_capability"]]
        if r["optin_limit_bytes"] == row["optin_limit_bytes"]:
            assert r["stages"] == row["stages"], (r, row)


def test_fit_asks_the_driver_for_a_cubins_static_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fit.test_fit import KERNELS
    from tests.nvrtc import compile_source

    ok, log, _, cubin = compile_source(KERNELS, "sm_90", [], cubin=True)
    assert ok, log
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    # The driver is asked only where local GPUs are in play: --no-local imports no CUDA.
    assert cli.main(["fit", "--cubin", str(path), "--kernel", "tiled", "--dynamic", "1000", "--arch", "h200",
                     "--json", "-", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "read by the driver (the file agrees)" in data["source"], data["source"]


def test_clusters_are_measured_on_hopper(gpu_report: tuple[int, dict]) -> None:
    _, report = gpu_report
    dev = report["devices"][0]
    if tuple(map(int, dev["compute_capability"].split("."))) < (9, 0):
        pytest.skip(f"clusters need cc 9.0+ (device: {dev['compute_capability']})")
    m = dev["measured"]
    assert m["clusters_skipped"] is None
    assert m["clusters"] and m["clusters"][-1]["dynamic_bytes"] == m["optin_dynamic_ceiling_bytes"]
    for c in m["clusters"]:
        assert c["max_cluster_size_portable"] == 8
        assert c["dsm_verified"] is True
        assert c["active_clusters"]
    rows = [v for v in dev["verdicts"] if "cluster" in v["quantity"] or "distributed" in v["quantity"]]
    assert rows and all(v["verdict"] in ("match", "MISMATCH") for v in rows)


def test_numba_agrees_with_cupy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "all.json"
    cli.main(["--backend", "all", "--device", "0", "--json", str(out), "--quiet"])
    capsys.readouterr()
    report = json.loads(out.read_text())
    assert [d["backend"] for d in report["devices"]] == ["cupy", "numba"]
    numba = report["devices"][1]
    assert numba["error"] is None, numba["error"]
    rows = [v for v in report["devices"][0]["verdicts"] if v["quantity"].startswith("cupy = numba: ")]
    assert len(rows) > 50
    disagreements = [(v["quantity"], v["note"]) for v in rows if v["verdict"] != "match"]
    assert disagreements == []


def test_a_real_illegal_access_ends_only_a_worker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fault.json"
    cli.main(["--device", "0", "--inject-fault", "static_split:0:128", "--json", str(out), "--quiet"])
    capsys.readouterr()
    dev = json.loads(out.read_text())["devices"][0]
    (event,) = dev["events"]
    assert event["what"] == "sticky fault" and event["where"] == "device 0, step static_split:0:128"
    assert "illegal" in event["detail"].lower() or "misaligned" in event["detail"].lower(), event
    assert dev["error"] is None
    driver = dev["reported"]["driver"]
    assert dev["measured"]["optin_dynamic_ceiling_bytes"] == driver["max_shared_memory_per_block_optin_bytes"]
    assert dev["measured"]["default_dynamic_ceiling_bytes"] == driver["max_shared_memory_per_block_bytes"]


def test_a_batch_of_launches_answers_as_single_launches() -> None:
    from bisect_smem.devices.backends.cupy.backend import CupySession
    from bisect_smem.devices.probes import Launch, Outcome, ProbeKernel

    session = CupySession(0, (0, 1024))
    optin = session.driver_attributes()[97]
    # Two kernels and two block sizes in one batch, each size's attribute set just before its launch,
    # as the splits' shared rounds ask them.
    launches = [Launch(ProbeKernel(static, True), n, threads, True)
                for static in (1024, 0) for threads in (128, 1024)
                for n in (0, 4096, (optin - static) // 2, optin - static, optin - static + 1, 1 << 20)]
    batched = session.launch_batch(launches)
    single = []
    for probe in launches:
        accepted = session.set_max_dynamic(probe.kernel, probe.dynamic_bytes)
        single.append(accepted if not accepted.ok else session.launch(probe.kernel, probe.dynamic_bytes, probe.threads))
    assert [o.outcome for o in batched] == [o.outcome for o in single]
    assert [o.ok for o in batched] == [True, True, True, True, False, False] * 4
    assert all(o.bytes_verified == p.dynamic_bytes + p.kernel.static_bytes
               for o, p in zip(batched, launches, strict=True) if o.ok)
    assert batched[5].outcome is Outcome.INVALID_VALUE
    session.close()


def test_a_batch_of_residency_probes_counts_as_single_probes() -> None:
    from bisect_smem.devices.backends.cupy.backend import CupySession
    from bisect_smem.devices.probes import ResidencyProbe

    session = CupySession(0, (0,), frozenset({"residency", "carveout"}))
    probes = [ResidencyProbe(n, 32, 20_000, percent) for n in (0, 8192, 60_000, 115_000, 200_000)
              for percent in (None, 0, 100)]
    batched = session.residency_batch(probes)
    single = [session.residency(p.dynamic_bytes, p.threads, p.hold_ns, p.carveout_percent) for p in probes]
    assert all(o.ok for o in batched), [o.detail for o in batched if not o.ok]
    assert [(o.blocks_per_sm_min, o.blocks_per_sm_max, o.api_blocks_per_sm) for o in batched] == \
           [(o.blocks_per_sm_min, o.blocks_per_sm_max, o.api_blocks_per_sm) for o in single]
    session.close()


def test_the_available_dynamic_api_answers_for_every_ceiling(gpu_report: tuple[int, dict]) -> None:
    _, report = gpu_report
    dev = report["devices"][0]
    m = dev["measured"]
    assert "max_oversized_shared_memory_per_block_bytes" in dev["reported"]["driver"]
    assert m["default_api_available_dynamic_bytes"] is not None
    assert all(s["api_available_dynamic_bytes"] is not None for s in m["static_splits"])
    rows = [v for v in dev["verdicts"] if v["quantity"].startswith("available dynamic (API)")]
    assert rows and all(v["kind"] == "limit" for v in rows)


def test_strict_fails_where_the_device_beats_a_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          gpu_report: tuple[int, dict]) -> None:
    code, report = gpu_report
    differs = any(v["verdict"] == "differs" for v in report["devices"][0]["verdicts"])
    strict = cli.main(["--json", str(tmp_path / "strict.json"), "--quiet", "--device", "0", "--strict"])
    lines = capsys.readouterr().out.splitlines()
    assert strict == (1 if differs or code == 1 else code)
    assert max(len(line) for line in lines) <= 100


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict]:
    out = tmp_path_factory.mktemp("gpu-full") / "full.json"
    code = cli.main(["--json", str(out), "--quiet", "--device", "0", "--level", "full"])
    return code, json.loads(out.read_text())


def test_full_level_tests_every_sm_and_every_granule(full_report: tuple[int, dict]) -> None:
    _, report = full_report
    dev = report["devices"][0]
    assert report["level"] == dev["measured"]["level"] == "full"
    driver, m = dev["reported"]["driver"], dev["measured"]
    march = m["march"]
    assert march is not None, dev["error"]
    assert len(march["sms_seen"]) == driver["multiprocessor_count"], march
    assert march["failures"] == [], march["failures"]
    assert march["dynamic_bytes"] == m["optin_dynamic_ceiling_bytes"] - m["optin_dynamic_ceiling_bytes"] % 4
    sweep = m["granule_sweep"]
    assert sweep["failing_bytes"] == [] and sweep["over_ceiling_failed"] is True, sweep
    assert sweep["sizes_tested"] >= m["optin_dynamic_ceiling_bytes"] // m["allocation_granularity_bytes"] + 2
    assert not [v for v in dev["verdicts"] if v["verdict"] == "ERROR"]


def test_full_level_records_the_cross_process_answer(full_report: tuple[int, dict]) -> None:
    code, report = full_report
    dev = report["devices"][0]
    left = dev["measured"]["leftovers"]
    assert left is not None, dev["error"]
    assert left["writer_sms"] == left["reader_sms"] == dev["reported"]["driver"]["multiprocessor_count"]
    (across,) = [v for v in dev["verdicts"] if v["quantity"] == "data of an earlier process visible"]
    assert across["verdict"] == ("MISMATCH" if left["across_processes_words_matching"] else "match")
    (within,) = [v for v in dev["verdicts"] if v["quantity"].startswith("data of an earlier kernel")]
    assert within["verdict"] == "info"
    print(f"cross-process: {across['measured']}; within a process: {within['measured']}")
    assert code == (1 if any(v["verdict"] == "MISMATCH" for v in dev["verdicts"]) else 0)


def test_the_march_kernel_reads_its_sm_and_every_word() -> None:
    from bisect_smem.core.integrity import MARCH_READS_PER_WORD
    from bisect_smem.devices.backends.cupy.backend import CupySession

    session = CupySession(0, (0,))
    try:
        attrs = session.driver_attributes()
        sms, ceiling = attrs[16], attrs[97] - attrs[97] % 4
        outcome = session.march(ceiling, 512, sms, 12345)  # at the ceiling one block fits per SM
        assert outcome.outcome.value == "ok", outcome.detail
        assert len(outcome.blocks) == sms and {b.sm_id for b in outcome.blocks} == set(range(sms))
        assert all(b.passed and b.reads_checked == MARCH_READS_PER_WORD * (ceiling // 4) for b in outcome.blocks)
        wrote = session.leftover_write(65536, 512, sms, 99)
        assert wrote.words == sms * 16384 and len(set(wrote.sm_ids)) <= sms
    finally:
        session.close()
