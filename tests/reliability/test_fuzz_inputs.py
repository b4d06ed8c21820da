"""Hostile values for every reader and option, generated from a fixed seed for about a minute: reports and
baselines (values, types, nesting, truncation, bytes, file kinds), --simulate specs, the measuring
options, fit's sizes, tiles, --explain texts, cubins and PTX (numbers of thousands of digits and ``.align 0``
included). Each run must exit 0..4, say any error in
one line, never print a traceback, finish in bounded time and memory, and change no file but the ones
it was asked to write. ``BISECT_SMEM_FUZZ_SECONDS`` sets the budget (default 60)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import resource
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.app.cli.main import main
from tests.paths import DATA

SEED = 21
BUDGET_S = float(os.environ.get("BISECT_SMEM_FUZZ_SECONDS", "60"))
CASE_LIMIT_S = 30
PREFIXES = ("error: ", "hint: ", "warning: ", "saved baseline ")
HUGE = "9" * 5000
NUMBERS = ["-1", "0", "-5", str(2**70), str(2**63), str(2**63 - 1), "1e9", "inf", "nan", "\u00b2", "\u0663",
           "1_0", "0x10", " 7 ", "", "007", "1.5", "\u200b1", "9" * 30, "4096", "232448", "2M", "1K", "-0"]
TEXTS = ["", ".", "..", "x", "a\x1bb", "\x00", "line\nbreak", "\u202eabc", "x" * 3000, "\u2603", "9.0", "9",
         "abc", "a,b", "a=b", "a:b", "a-b", "-", " "]
KERNEL = """
extern "C" __global__ void tiled(float* out) {
    __shared__ float tile[1024];
    tile[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[1023 - threadIdx.x];
}
"""


@dataclass
class Case:
    """One run: its arguments, the names it may write (relative to the case folder), and how it was made."""

    argv: list[str]
    writes: set[str] = field(default_factory=set)
    what: str = ""


class Alarm(BaseException):
    """A run took longer than CASE_LIMIT_S (a BaseException, so no handler of the tool swallows it)."""


def _alarm(_signum: int, _frame: object) -> None:
    raise Alarm


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: kind, size, and for regular files a hash of the content."""
    seen: dict[str, tuple] = {}
    for path in folder.rglob("*"):
        info = path.lstat()
        rel = str(path.relative_to(folder))
        if path.is_symlink() or not path.is_file():
            seen[rel] = (info.st_mode >> 12,)
        else:
            seen[rel] = (info.st_size, hashlib.sha1(path.read_bytes()).hexdigest())
    return seen


def hostile_value(rng: random.Random) -> Any:
    """A JSON value no report holds in that place, or one it might."""
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice([-5, 0, -1, 2**70, 2**63, 2**63 - 1, 10**300, -(2**64)])
    if kind == 1:
        return rng.choice([1.5, -0.0, 1e308, float("nan"), float("inf")])
    if kind == 2:
        return rng.choice(TEXTS)
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:
        return rng.choice([[], {}, [1, 2], {"a": 1}, {"": None}])
    if kind == 5:
        depth = rng.choice([10, 200, 900])
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value
    if kind == 6:
        return [rng.randrange(-3, 1 << 20) for _ in range(rng.randrange(50))]
    if kind == 7:
        return {"abc": {"measured": 1, "api": 1}, rng.choice(["0", "17", "-1", "1.5"]): {"measured": -1}}
    if kind == 8:
        return rng.choice(["bogus", "quick", "full", "9.0", "99.99", "0.0", "9"])
    return rng.randrange(-2, 300000)


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (keys and indexes), the value's own included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:6]):
            found += paths_of(item, (*prefix, i))
    return found


def mutate_doc(doc: dict, rng: random.Random, paths: list[tuple]) -> dict:
    """A copy of ``doc`` with one to three values replaced, keys removed or keys added."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths[1:])
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            last = path[-1]
            action = rng.randrange(4)
            if action == 0 and isinstance(parent, dict):
                parent.pop(last, None)
            elif action == 1 and isinstance(parent, dict):
                parent[rng.choice(TEXTS[:6] + ["extra"])] = hostile_value(rng)
            else:
                parent[last] = hostile_value(rng)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """``data`` cut short, with bytes flipped or inserted, behind a byte-order mark, or replaced."""
    kind = rng.randrange(6)
    if kind == 0:
        return data[:rng.randrange(len(data) + 1)]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]
    if kind == 3:
        return rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b""]) + data
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
    return rng.choice([b"", b"null", b"[]", b"{}", b'{"schema": "bisect_smem/report/v1"}', b"\x00" * 64])


def place(folder: Path, name: str, data: bytes, rng: random.Random) -> Path:
    """Write ``data`` as ``name``, or put another kind of file there (a FIFO, a folder, a link loop, a device)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = rng.randrange(40)
    if kind == 0:
        os.mkfifo(path)
    elif kind == 1:
        path.mkdir()
    elif kind == 2:
        path.symlink_to(path)
    elif kind == 3:
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(data)
    return path


@dataclass
class Material:
    """What cases are made from: a real H200 report (standard and full), a baseline, a cubin and PTX."""

    reports: list[dict]
    report_paths: list[list[tuple]]
    baseline: dict
    baseline_paths: list[tuple]
    model: str
    cubin: bytes | None
    ptx: str | None


def report_case(m: Material, rng: random.Random, folder: Path) -> Case:
    which = rng.randrange(len(m.reports))
    doc = mutate_doc(m.reports[which], rng, m.report_paths[which])
    data = json.dumps(doc).encode()
    if rng.random() < 0.3:
        data = mutate_bytes(data, rng)
    path = place(folder, "r.json", data, rng)
    consumer = rng.randrange(4)
    if consumer == 0:
        return Case(["--simulate", str(path), "--level", rng.choice(["quick", "quick", "standard"]), "--inline",
                     "--quiet", "--json", "out.json"], {"out.json"}, "replay")
    if consumer == 1:
        other = folder / "other.json"
        other.write_text(json.dumps(m.reports[0]))
        return Case(["merge", str(path), str(other)], set(), "merge")
    if consumer == 2:
        return Case(["fit", "1000", "--no-local", "--target", str(path)], set(), "fit --target")
    return Case(["--simulate", f"{path},device={rng.choice(['0', '1', '٣', HUGE])}", "--level", "quick", "--inline",
                 "--quiet"], set(), "replay device")


def baseline_case(m: Material, rng: random.Random, folder: Path) -> Case:
    doc = mutate_doc(m.baseline, rng, m.baseline_paths)
    data = json.dumps(doc).encode()
    if rng.random() < 0.3:
        data = mutate_bytes(data, rng)
    place(folder, f"b/{m.model}/{rng.choice(['simulated', 'other', '1.0'])}.json", data, rng)
    consumer = rng.randrange(3)
    if consumer == 0:
        return Case(["--simulate", "h200", "--level", "quick", "--inline", "--quiet", "--compare", "b"], set(),
                    "compare")
    if consumer == 1:
        return Case(["fit", "1000", "--no-local", "--target", "b"], set(), "fit --target DIR")
    (path,) = (folder / "b").rglob("*.json")
    return Case(["--simulate", str(path), "--level", "quick", "--inline", "--quiet"], set(), "replay baseline")


SPEC_KEYS = ["flaky", "seed", "hole", "sticky", "optin", "smem_per_sm", "reserved", "fewer", "bitflip", "holes",
             "leak", "device", "hang", "nope", ""]


def spec_case(_m: Material, rng: random.Random, _folder: Path) -> Case:
    pairs = []
    for _ in range(rng.randrange(4)):
        key = rng.choice(SPEC_KEYS)
        value = rng.choice([*NUMBERS, *TEXTS[:8], "5:1000", "1024-4096", "4096-1024", "yes", "maybe", HUGE,
                            "132:0", "0:232448", "0.5"])
        if key == "hang" and value not in ("", HUGE) and not value.startswith("-"):
            value = "4M"  # a hang that no probe reaches: anything less would hang an inline run
        pairs.append(f"{key}={value}" if rng.random() < 0.9 else key)
    profile = rng.choice(["h200", "a100", "rtx-pro-6000", "sm_75", "k80", "", "H200", " h200"])
    level = rng.choice(["quick", "quick", "full"])
    return Case(["--simulate", ",".join([profile, *pairs]), "--level", level, "--inline", "--quiet"], set(),
                "--simulate")


OPTIONS = ["--confirm", "--device", "--max-restarts", "--level", "--backend", "--format", "--json", "--plot",
           "--save-baseline", "--compare", "--inject-fault", "--probe-timeout"]


def option_case(_m: Material, rng: random.Random, _folder: Path) -> Case:
    option = rng.choice(OPTIONS)
    value = rng.choice([*NUMBERS, *TEXTS, HUGE])
    writes: set[str] = set()
    if option in ("--json", "--plot", "--save-baseline"):
        value = rng.choice(["out", "out.json", "o.png", "o.gif", "..", ".", "", "a\nb", "dir/", "x" * 300])
        writes = {value.rstrip("/") or "."}
    if option == "--probe-timeout" and value in ("1e9", "inf", "1.5"):
        value = "nan"
    inline = [] if option == "--probe-timeout" else ["--inline"]
    extra = rng.choice([[], [], ["merge"], ["fit", "1"], ["--force"], ["--strict"]])
    return Case(["--simulate", "h200", "--level", "quick", *inline, "--quiet", option, value, *extra], writes, option)


def fit_case(m: Material, rng: random.Random, folder: Path) -> Case:
    value = rng.choice([*NUMBERS, HUGE, *TEXTS[:10], "110592", "108KiB", "99K", "1.5MiB", "4294967297", "12XB"])
    kind = rng.randrange(6)
    if kind == 0:
        return Case(["fit", value, "--no-local"], set(), "fit BYTES")
    if kind == 1:
        tile = rng.choice([f"{value}x8x8", "8x8", "0x8x8", "-1x2x3", "128x256x64", f"8x8x{value}", "8x8x8x8"])
        stages = rng.choice([[], ["--stages", "auto"], ["--stages", value], ["--stages", "0"]])
        dtype = rng.choice([[], ["--dtype", "bf16"], ["--dtype", ""], ["--dtype", "fp99"], ["--dtype-a", value]])
        return Case(["fit", "--tile", tile, *stages, *dtype, "--no-local"], set(), "fit --tile")
    if kind == 2:
        text = rng.choice([f"Required: {value}, Hardware limit: 101376", value,
                           "out of resource: shared memory, Required: 131072, Hardware limit: 101376", "x" * 5000])
        return Case(["fit", "--explain", text, "--no-local", *rng.choice([[], ["--tile", "128x128x64"]])], set(),
                    "fit --explain")
    if kind == 3 and m.cubin is not None:
        data = mutate_bytes(m.cubin, rng) if rng.random() < 0.8 else m.cubin
        path = place(folder, "k.cubin", data, rng)
        return Case(["fit", "--cubin", str(path), "--kernel", rng.choice(["tiled", "nope", ""]), "--no-local"],
                    set(), "fit --cubin")
    if kind == 4 and m.ptx is not None:
        path = place(folder, "k.ptx", _mutate_ptx(m.ptx, rng).encode(errors="surrogateescape"), rng)
        return Case(["fit", "--ptx", str(path), "--kernel", rng.choice(["tiled", "nope"]), "--no-local"], set(),
                    "fit --ptx")
    return Case(["fit", "--dynamic", value, "--static", rng.choice(["0", value, "48K"]), "--no-local"], set(),
                "fit --dynamic")


def _mutate_ptx(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        kind = rng.randrange(4)
        if kind == 0:
            lines[i] = lines[i].replace("1024", rng.choice(["0", "-1", "99999999999999", "1e3", "x"]))
        elif kind == 1:
            del lines[i]
        elif kind == 2:
            lines.insert(i, rng.choice(lines))
        else:
            lines.insert(i, rng.choice([".shared .b8 big[4294967296];", ".shared .b32 x;", "\x00\x1b", ".entry (",
                                        ".shared .align 16 .b8 s[12];"]))
    return "\n".join(lines)


GENERATORS: list[tuple[Callable[[Material, random.Random, Path], Case], int]] = [
    (report_case, 5), (baseline_case, 3), (spec_case, 3), (option_case, 3), (fit_case, 4)]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    reports = [json.loads((DATA / name).read_text()) for name in ("h200_report.json", "h200_full_report.json")]
    folder = tmp_path_factory.mktemp("fuzz-baseline")
    assert main(["--simulate", "h200", "--level", "quick", "--save-baseline", str(folder), "--quiet"]) == 0
    (path,) = folder.rglob("*.json")
    baseline = json.loads(path.read_text())
    cubin = ptx = None
    try:
        from .nvrtc import compile_source

        ok, _, _, cubin = compile_source(KERNEL, "sm_90", [], cubin=True)
        ok2, _, _, ptx_bytes = compile_source(KERNEL, "sm_90", [])
        cubin = cubin if ok else None
        ptx = ptx_bytes.decode(errors="replace").rstrip("\0") if ok2 else None
    except Exception:  # noqa: BLE001 - without NVRTC the cubin and PTX cases are left out
        pass
    return Material(reports, [paths_of(r) for r in reports], baseline, paths_of(baseline), path.parent.name,
                    cubin, ptx)


def run_case(case: Case, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    start = time.monotonic()
    try:
        code = main(case.argv)
    except Alarm:
        pytest.fail(f"{case.what}: still running after {CASE_LIMIT_S} s: {case.argv!r:.300}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    return code, captured.out, captured.err, time.monotonic() - start


def check(case: Case, code: int, out: str, err: str, before: dict, after: dict) -> None:
    where = f"{case.what}: {case.argv!r:.400}\nstderr: {err[-1500:]}"
    assert code in (0, 1, 2, 3, 4), where
    assert "Traceback" not in err and "Traceback" not in out, where
    lines = err.strip().splitlines()
    assert all(line.startswith(PREFIXES) for line in lines), where
    assert sum(line.startswith("error: ") for line in lines) <= 1, where
    if code == 2:
        assert lines and lines[-1].startswith("error: "), where
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    asked = {os.path.normpath(w) for w in case.writes}
    allowed = {p for p in changed if "." in asked or any(p == w or p.startswith(w + "/") for w in asked)}
    assert changed == allowed, f"{where}\nchanged: {sorted(changed - allowed)}"


def test_fuzz_every_reader_and_option(material: Material, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(int(os.environ.get("BISECT_SMEM_FUZZ_SEED", SEED)))
    outcomes: Counter[tuple[str, int]] = Counter()
    weighted = [g for g, weight in GENERATORS for _ in range(weight)]
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, cases, slowest = time.monotonic(), 0, (0.0, "")
    while time.monotonic() - start < BUDGET_S:
        folder = tmp_path / f"case{cases}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        generate = rng.choice(weighted)
        case = generate(material, rng, folder)
        before = snapshot(folder)
        code, out, err, seconds = run_case(case, folder, capsys)
        check(case, code, out, err, before, snapshot(folder))
        slowest = max(slowest, (seconds, case.what))
        outcomes[(case.what, int(code))] += 1
        cases += 1
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    print(f"{cases} cases in {time.monotonic() - start:.0f} s; slowest {slowest[0]:.1f} s ({slowest[1]}); "
          f"peak memory grew {grown_mib:.0f} MiB; by reader and exit code: {sorted(outcomes.items())}")
    assert cases >= 100 and grown_mib < 512


def test_fit_refuses_numbers_of_thousands_of_digits_and_align_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, material: Material,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    cases = [Case(["fit", HUGE, "--no-local"], what="fit BYTES"),
             Case(["fit", "--tile", f"{HUGE}x8x8", "--no-local"], what="fit --tile"),
             Case(["fit", "--explain", HUGE, "--no-local"], what="fit --explain"),
             Case(["fit", "--dynamic", "1", "--static", HUGE, "--no-local"], what="fit --static"),
             Case(["fit", "--tile", "8x8x8", "--epilogue", HUGE, "--no-local"], what="fit --epilogue")]
    if material.ptx is not None:
        for name, text in (("align0.ptx", material.ptx.replace(".shared .align 4", ".shared .align 0")),
                           ("digits.ptx", material.ptx.replace("[4096]", f"[{HUGE}]"))):
            (tmp_path / name).write_text(text)
            cases.append(Case(["fit", "--ptx", name, "--kernel", "tiled", "--no-local"], what=f"fit --ptx {name}"))
    for case in cases:
        before = snapshot(tmp_path)
        code, out, err, _ = run_case(case, tmp_path, capsys)
        check(case, code, out, err, before, snapshot(tmp_path))
