"""What the tool says, for a fixed set of runs, in one JSON file: to prove a change that should not change
behaviour does not, run it on both checkouts and compare.

    python tests/snapshot_outputs.py record OUT.json          # with this checkout's bisect_smem
    PYTHONPATH=/other/checkout python tests/snapshot_outputs.py record OLD.json
    python tests/snapshot_outputs.py compare OLD.json NEW.json

Every run goes through the real entry point (``cli.main``): every simulated profile at every level, the
saved H200 reports replayed at every level, faults, the text, verbose, strict and Markdown renderings,
baselines, comparisons, merges, ``fit`` and bad input. Per run it keeps the exit code, stdout and stderr
(times and dates blanked), and per device of the JSON report its quantities (``json_quantities``) and
its verdict rows. ``compare`` requires all of those to be equal, and the old JSON report to be contained
in the new one (fields may only be added).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPORTS = [str(ROOT / "tests/data/h200_report.json"), "/work/round1/before_report.json",
           "/work/round1/before_full.json"]
LEVELS = ("quick", "standard", "full")
VERDICT_FIELDS = ("quantity", "reported", "source", "measured", "verdict", "note", "kind")
# What changes from run to run: dates, hosts, seconds.
VOLATILE = {"created_utc", "host", "elapsed_s", "timings_s", "when", "date_utc"}
_SECONDS = re.compile(r"\d+\.\d+ s\b")
_DATE = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+Z]+")
_TIMESTAMP = re.compile(r"(timestamp\S*[ =])[0-9.e+]+")


def _cases(work: Path) -> list[tuple[str, list[str]]]:
    from bisect_smem.core.profiles import PROFILES

    cases: list[tuple[str, list[str]]] = []
    for p in PROFILES:
        for level in LEVELS:
            cases.append((f"{p.key}/{level}", ["--simulate", p.key, "--level", level]))
        cases.append((f"{p.key}/verbose", ["--simulate", p.key, "--verbose"]))
        cases.append((f"{p.key}/markdown", ["--simulate", p.key, "--format", "markdown"]))
    for report in REPORTS:
        if not Path(report).is_file():
            continue
        name = Path(report).name
        for level in LEVELS:
            cases.append((f"replay {name}/{level}", ["--simulate", report, "--level", level]))
        cases.append((f"replay {name}/verbose", ["--simulate", report, "--verbose", "--level", "full"]))
        cases.append((f"replay {name}/markdown", ["--simulate", report, "--format", "markdown"]))
        cases.append((f"replay {name}/strict", ["--simulate", report, "--strict"]))
        cases.append((f"replay {name}/faults", ["--simulate", f"{report},flaky=0.3,seed=5,hole=40000"]))
    faults = ("h200,fewer=2", "h200,optin=200K", "h200,smem_per_sm=200K,optin=198K,reserved=2K", "a100,flaky=0.2,seed=3",
              "h200,hole=30000", "rtx-pro-6000,holes=1024-4096", "h200,bitflip=5:1000", "l4,leak=yes",
              "sm_103,flaky=1", "v100,optin=1K")
    for spec in faults:
        level = "full" if any(k in spec for k in ("bitflip", "holes", "leak")) else "standard"
        cases.append((f"fault {spec}", ["--simulate", spec, "--level", level]))
        cases.append((f"fault {spec}/verbose", ["--simulate", spec, "--level", level, "--verbose"]))
    cases.append(("two devices", ["--simulate", "h200", "--simulate", "rtx-pro-6000"]))
    cases.append(("two devices/markdown", ["--simulate", "h200", "--simulate", "t4", "--format", "markdown"]))
    cases.append(("sticky", ["--simulate", "h200,sticky=200000", "--probe-timeout", "600"]))
    cases.append(("inline sticky", ["--simulate", "h200,sticky=200000", "--inline"]))
    cases += _file_cases(work)
    cases += _bad_input_cases()
    return cases


def _file_cases(work: Path) -> list[tuple[str, list[str]]]:
    base, a, b = str(work / "baselines"), str(work / "a.json"), str(work / "b.json")
    return [
        ("save baseline", ["--simulate", "h200", "--save-baseline", base]),
        ("save baseline again", ["--simulate", "h200", "--save-baseline", base]),
        ("compare same", ["--simulate", "h200", "--compare", base]),
        ("compare regressed", ["--simulate", "h200,optin=200K,fewer=1", "--compare", base]),
        ("compare quick", ["--simulate", "h200", "--level", "quick", "--compare", base]),
        ("compare missing", ["--simulate", "a100", "--compare", base]),
        ("compare missing allowed", ["--simulate", "a100", "--compare", base, "--allow-missing"]),
        ("report a", ["--simulate", "h200", "--json", a]),
        ("report b", ["--simulate", "h200", "--simulate", "h200,fewer=1", "--simulate", "a100", "--json", b]),
        ("merge", ["merge", a, b]),
        ("profiles", ["profiles"]),
        ("fit", ["fit", "110592", "--no-local"]),
        ("fit sim", ["fit", "100K", "--simulate", "h200"]),
        ("fit tile", ["fit", "--tile", "128x256x64", "--stages", "auto", "--dtype", "bf16", "--no-local"]),
        ("fit target", ["fit", "200K", "--target", str(ROOT / "tests/data/h200_report.json")]),
        ("json stdout", ["--simulate", "t4", "--json", "-"]),
        ("fleet files", ["--simulate", "h200", "--simulate", "h200,fewer=1", "--json", b, "--prom",
                         str(work / "m.prom"), "--nfd", str(work / "f.nfd")]),
        ("export prom", ["export", "prom", b]),
        ("export nfd", ["export", "nfd", b]),
        ("check", ["check", b]),
        ("check ok", ["check", a]),
        ("schema", ["schema"]),
        ("no gpu json", ["--json", str(work / "none.json")]),
    ]


def _bad_input_cases() -> list[tuple[str, list[str]]]:
    bad = [["--simulate", "k80"], ["--simulate", "h200,flaky"], ["--simulate", "h200,flaky=2"],
           ["--simulate", "h200,hole=abc"], ["--simulate", "h200,bitflip=5"], ["--simulate", "h200,holes=4096"],
           ["--simulate", "h200,holes=4096-1024"], ["--simulate", "h200,leak=maybe"], ["--backend", "opencl"],
           ["--level", "fast"], ["--level", "full", "--backend", "numba"], ["--simulate", "missing.json"],
           ["--simulate", f"{ROOT / 'tests/data/h200_report.json'},device=3"],
           ["--simulate", f"{ROOT / 'tests/data/h200_report.json'},optin=1K"],
           ["--simulate", "h200", "--format", "markdown", "--json", "-"], ["--simulate", "h200", "--json", ""],
           ["--simulate", "h200", "--force"], ["--simulate", "h200", "--allow-missing"],
           ["--simulate", "h200", "--inline", "--probe-timeout", "1"], ["--simulate", "h200,hole=1,hole=2"],
           ["--simulate", "h200", "--compare", "/nonexistent"], ["--device", "-1"], ["--device", "one"],
           ["--backend", "sim"], ["fit", "12XB"], ["merge", "/nonexistent.json"]]
    return [(f"bad {' '.join(args)}", args) for args in bad]


def _blank(text: str, work: Path) -> str:
    text = _SECONDS.sub("S s", text.replace(str(work), "WORK"))
    return _TIMESTAMP.sub(r"\1T", _DATE.sub("DATE", text))


def _stable(value: Any) -> Any:
    """The JSON without what varies from run to run."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _run(args: list[str], work: Path) -> dict[str, Any]:
    from bisect_smem.app.cli import main as cli
    from bisect_smem.core.quantities import json_quantities

    report = work / "snapshot-report.json"
    report.unlink(missing_ok=True)
    commands = ("merge", "profiles", "fit", "check", "export", "schema")
    extra = [] if "--json" in args or args[0] in commands else ["--json", str(report)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        quiet = [] if "--quiet" in args or args[0] in ("merge", "profiles", "check", "export", "schema") else ["--quiet"]
        code = cli.main([*args, *extra, *quiet])
    stdout = out.getvalue()
    result: dict[str, Any] = {"code": code, "stderr": _blank(err.getvalue(), work)}
    if stdout.startswith("{"):  # the JSON report itself: compared as the --json file is
        result["stdout_json"] = _stable(json.loads(stdout))
    else:
        result["stdout"] = _blank(stdout, work)
    written = next((Path(b) for a, b in zip(args, args[1:], strict=False) if a == "--json" and b != "-"), report)
    if written.is_file():
        data = json.loads(written.read_text())
        result["json"] = _stable(data)
        result["devices"] = [{"quantities": json_quantities(d),
                              "verdicts": [[v.get(f) for f in VERDICT_FIELDS] for v in d.get("verdicts", ())]}
                             for d in data["devices"]]
    return result


def record(path: Path) -> None:
    """Run every case with the bisect_smem on the import path and write what it said to ``path``."""
    import bisect_smem

    print(f"bisect_smem from {Path(bisect_smem.__file__).parent}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bisect-smem-snapshot-") as folder:
        work = Path(folder)
        snapshot = {name: _run(args, work) for name, args in _cases(work)}
    path.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print(f"{len(snapshot)} runs recorded in {path}", file=sys.stderr)


def _contains(old: Any, new: Any, where: str) -> list[str]:
    """Where ``new`` lacks or changes something ``old`` has (fields added in ``new`` are fine)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for k, v in old.items()
                for p in ([f"{where}.{k}: missing"] if k not in new else _contains(v, new[k], f"{where}.{k}"))]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in _contains(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


def compare(old_path: Path, new_path: Path) -> int:
    """0 when every run said the same, else 1 with each difference on stdout."""
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    problems = [f"{name}: only in {old_path}" for name in old if name not in new]
    problems += [f"{name}: only in {new_path}" for name in new if name not in old]
    for name in sorted(set(old) & set(new)):
        a, b = old[name], new[name]
        for key in ("code", "stdout", "stderr", "devices"):
            if a.get(key) != b.get(key):
                problems.append(f"{name}: {key} differs")
        for key in ("json", "stdout_json"):
            problems += [f"{name}: {p}" for p in _contains(a.get(key), b.get(key), key)]
    for line in problems:
        print(line)
    print(f"{len(set(old) & set(new))} runs compared, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
