"""Every input goes through one reader (core/input.py, core/saved.py): only regular files, never a wait on
a FIFO; bounded size, value density (so memory), digits and nesting; values no device can have refused
where the file is read, naming the field and the value; a file is one file however it is named."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bisect_smem.core import saved
from tests.conftest import one_error
from tests.conftest import run_main as run
from tests.paths import H200_FULL, H200_REPORT, ROOT

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def h200() -> dict:
    return json.loads(H200_REPORT.read_text())



def within(seconds: float, call):
    """call() on a thread; fail when it has not returned within ``seconds`` (a FIFO would block it forever)."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert result, f"still running after {seconds} s"
    return result[0]


def test_a_fifo_as_input_is_refused_without_waiting(tmp_path: Path, h200_baseline: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    (model,) = h200_baseline.iterdir()
    (model / "simulated.json").unlink()  # the baseline this run is compared with (the others are not read)
    os.mkfifo(model / "simulated.json")
    for args, name in ((["merge", str(fifo)], str(fifo)), (["--simulate", str(fifo)], f"--simulate {fifo}"),
                       (["fit", "1000", "--target", str(fifo)], f"--target {fifo}"),
                       (["--simulate", "h200", "--compare", str(h200_baseline)], str(model / "simulated.json"))):
        code, _, err = within(30, lambda args=args: run(args, capsys))
        assert code == 2 and one_error(err).startswith(f"error: {name}: not a readable "), args
        assert "(a FIFO, not a regular file)" in err


@pytest.mark.parametrize("node", ["/dev/zero", "/dev/null"])
def test_a_device_node_as_input_is_refused(node: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["merge", node], capsys)
    assert code == 2 and "(a character device, not a regular file)" in one_error(err)


def test_a_folder_as_a_report_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").mkdir()
    code, _, err = run(["--simulate", str(tmp_path / "x.json")], capsys)
    assert code == 2 and "(a folder, not a regular file)" in one_error(err)


def test_a_symlink_loop_as_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    for args in (["merge", str(loop)], ["--simulate", str(loop)], ["fit", "1", "--target", str(loop)]):
        code, _, err = run(args, capsys)
        assert code == 2 and "Too many levels of symbolic links" in one_error(err), args


def test_a_hard_link_is_the_same_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.json"
    a.write_text(H200_REPORT.read_text())
    os.link(a, tmp_path / "b.json")
    code, out, err = run(["merge", str(a), str(tmp_path / "b.json")], capsys)
    assert (code, out) == (2, "") and one_error(err) == (f"error: {tmp_path / 'b.json'} is the same file as {a}; "
                                                         "give each report once")


def test_the_size_cap_is_what_the_tool_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A full-level report is about 95 KB a device; the cap holds well over a hundred, and no more.
    full_per_device = H200_FULL.stat().st_size  # a real H200's report at --level full, one device
    assert 128 * full_per_device < saved.MAX_FILE_BYTES <= 256 * full_per_device
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(saved.MAX_FILE_BYTES + 1)  # sparse: the size alone refuses it, before any byte is read
    code, _, err = run(["merge", str(big)], capsys)
    assert code == 2 and f"(larger than {saved.MAX_FILE_BYTES} B)" in one_error(err)


def _peak_rss_kb(args: list[str]) -> tuple[int, int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "bisect_smem", *args], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss, err


def _dense(doc: dict, filler: str, size: int) -> str:
    doc = copy.deepcopy(doc)
    doc["devices"][0]["context"]["x"] = None
    text = json.dumps(doc, separators=(",", ":"))
    count = (size - len(text)) // (len(filler) + 1)
    return text.replace('"x":null', '"x":[' + ",".join([filler] * count) + "]")


@pytest.mark.parametrize("filler", ["{}", "0", '"abcdef"'], ids=["objects", "numbers", "strings"])
def test_memory_stays_a_small_multiple_of_the_file(filler: str, tmp_path: Path) -> None:
    # The densest JSON under the cap: tens of times its size as Python objects, unless refused by density.
    path = tmp_path / "dense.json"
    path.write_text(_dense(h200(), filler, saved.MAX_FILE_BYTES - 64))
    base = _peak_rss_kb(["profiles"])[1]
    for args in (["merge", str(path)], ["--simulate", str(path), "--quiet", "--json", os.devnull]):
        code, rss, err = _peak_rss_kb(args)
        assert code in (0, 1, 2, 4) and "Traceback" not in err, err
        assert rss - base < 20 * saved.MAX_FILE_BYTES // 1024, (args, rss, base)


@pytest.mark.parametrize("digits", [4301, 20000])
def test_a_number_of_thousands_of_digits_is_one_line(digits: int, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "digits.json"
    path.write_text(H200_REPORT.read_text().replace('"multiprocessor_count": 132', f'"multiprocessor_count": {"9" * digits}', 1))
    for args in (["merge", str(path)], ["--simulate", str(path)], ["fit", "1", "--target", str(path)]):
        code, _, err = run(args, capsys)
        assert code == 2 and "a number of more than 4300 digits" in one_error(err), args


@pytest.mark.parametrize("depth", [900, 5000, 100000])
def test_json_nested_deep_is_one_line(depth: int, tmp_path: Path, h200_baseline: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    doc = h200()
    doc["devices"][0]["context"]["deep"] = None
    text = json.dumps(doc).replace('"deep": null', '"deep": ' + "[" * depth + "]" * depth)
    path = tmp_path / "deep.json"
    path.write_text(text)
    code, _, err = run(["merge", str(path)], capsys)
    assert code == 2 and ("nested" in one_error(err)), err
    (baseline,) = h200_baseline.rglob("*.json")
    saved_doc = json.loads(baseline.read_text())
    saved_doc["device"]["context"]["deep"] = None
    baseline.write_text(json.dumps(saved_doc).replace('"deep": null', '"deep": ' + "[" * depth + "]" * depth))
    code, _, err = run(["--simulate", "h200", "--compare", str(h200_baseline)], capsys)
    assert code == 2 and "nested" in one_error(err), err


def with_value(doc: dict, where: str, value: object) -> dict:
    doc = copy.deepcopy(doc)
    target = doc["devices"][0]
    *path, last = where.split(".")
    for key in path:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return doc


IMPOSSIBLE = [
    ("reported.driver.max_shared_memory_per_block_optin_bytes", -5, "must be an integer in 1..16777216 (got -5)"),
    ("reported.driver.max_shared_memory_per_block_optin_bytes", 0, "must be an integer in 1..16777216 (got 0)"),
    ("reported.driver.max_shared_memory_per_block_optin_bytes", 2**70,
     f"must be an integer in 1..16777216 (got {2**70})"),
    ("reported.driver.max_shared_memory_per_block_optin_bytes", 2**40, f"must be an integer in 1..16777216 (got {2**40})"),
    ("measured.optin_dynamic_ceiling_bytes", -1, "must be an integer in 1024..16777216 (got -1)"),
    ("measured.allocation_granularity_bytes", 0, "must be an integer in 1..16777216 (got 0)"),
    ("measured.allocation_granularity_bytes", -128, "must be an integer in 1..16777216 (got -128)"),
    ("measured.level", "bogus", "must be one of quick, standard, full (got 'bogus')"),
    ("reported.driver.multiprocessor_count", "132", "must be an integer (got '132')"),
    ("reported.driver.multiprocessor_count", 5000, "must be an integer in 1..4096 (got 5000)"),
    ("measured.carveout.0.percent", 101, "must be an integer in -1..100 (got 101)"),
]


@pytest.mark.parametrize(("where", "value", "problem"), IMPOSSIBLE, ids=[f"{w}={v}"[-60:] for w, v, _ in IMPOSSIBLE])
def test_a_value_no_device_can_have_is_refused_when_read(where: str, value: object, problem: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(with_value(h200(), where, value)))
    field = f"field devices[0].{where.replace('.0.', '[0].')}"
    if not problem.startswith("must be an integer (got"):  # a wrong type is the shape check's, before the values
        field = f"device 0: {field}"
    for args, name in ((["--simulate", str(path)], f"--simulate {path}"), (["merge", str(path)], str(path)),
                       (["fit", "1000", "--target", str(path)], f"--target {path}")):
        code, out, err = run(args, capsys)
        assert (code, out) == (2, ""), args
        assert one_error(err) == f"error: {name}: {field} {problem}", args


def test_a_cluster_key_that_is_no_cluster_size_is_refused(h200_baseline: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (path,) = h200_baseline.rglob("*.json")
    doc = json.loads(path.read_text())
    doc["device"]["measured"]["clusters"][0]["active_clusters"]["abc"] = {"measured": 1, "api": 1}
    path.write_text(json.dumps(doc))
    code, _, err = run(["--simulate", "h200", "--compare", str(h200_baseline)], capsys)
    assert code == 2 and one_error(err) == (f"error: {path}: field device.measured.clusters[0].active_clusters has a "
                                            "key that is not a cluster size (1..16): 'abc'")


def test_a_baseline_saved_at_a_bogus_level_is_refused(h200_baseline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (path,) = h200_baseline.rglob("*.json")
    doc = json.loads(path.read_text())
    doc["provenance"]["level"] = "bogus"
    path.write_text(json.dumps(doc))
    code, _, err = run(["--simulate", "h200", "--compare", str(h200_baseline)], capsys)
    assert code == 2 and one_error(err) == (f"error: {path}: field provenance.level must be one of quick, "
                                            "standard, full (got 'bogus')")


@pytest.mark.parametrize("granule", [0, -128])
def test_a_replayed_granularity_of_zero_or_less_does_not_crash(granule: int, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(with_value(h200(), "measured.allocation_granularity_bytes", granule)))
    code, _, err = run(["--simulate", str(path), "--inline", "--level", "full"], capsys)
    assert code == 2 and "allocation_granularity_bytes must be an integer in 1..16777216" in one_error(err)


@pytest.mark.parametrize("option", ["--cubin", "--ptx"])
def test_a_fifo_as_a_compiled_kernel_is_refused_without_waiting(option: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "k.bin"
    os.mkfifo(fifo)
    code, _, err = within(30, lambda: run(["fit", option, str(fifo), "--kernel", "k", "--no-local"], capsys))
    assert code == 2 and one_error(err) == f"error: cannot read {fifo}: a FIFO, not a regular file"


@pytest.mark.parametrize("created", ["garbage", "", "0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59-12:00"])
def test_a_report_time_no_run_can_have_is_refused_when_read(created: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**h200(), "created_utc": created}))
    problem = f"field created_utc must be a time of the years 2000 to 9000, like 2026-12-01T09:45:12+00:00 (got {created!r})"
    for args in (["export", "prom", str(path)], ["export", "nfd", str(path)], ["merge", str(path)]):
        code, out, err = run(args, capsys)
        assert (code, out) == (2, "") and one_error(err) == f"error: {path}: {problem}", args
    code, out, err = run(["check", str(path)], capsys)
    assert code == 2 and out.startswith("smem UNKNOWN: ") and err == ""


def test_a_simulate_path_without_json_names_the_file_not_a_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    monkeypatch.chdir(tmp_path)
    for spec, why in [("/dev/zero", "(a character device, not a regular file)"),
                      (str(loop), "Too many levels of symbolic links"), ("loop", "Too many levels of symbolic links"),
                      (str(tmp_path), "(a folder, not a regular file)"), ("./gone", "No such file or directory")]:
        code, _, err = run(["--simulate", spec], capsys)
        assert code == 2 and one_error(err).startswith(f"error: --simulate {spec}: ") and why in err, (spec, err)
    code, _, err = run(["--simulate", "k80"], capsys)  # a name that is no path is still an unknown profile
    assert code == 2 and "unknown profile 'k80'" in one_error(err)
