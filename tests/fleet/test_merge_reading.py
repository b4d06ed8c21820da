"""How merge reads a report: its quantities come straight from the JSON yet equal those of the rebuilt
DeviceReport on every profile and on a real H200 report; orjson and the standard parser give the same
merge, to the integer beyond 64 bits; devices equal to Python but not in JSON (1 and true) are each
checked; the fields merge reads still name file and field when wrongly typed; a weighted majority and
ties come out as device by device."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from bisect_smem.analysis import merge
from bisect_smem.analysis.baseline import driver_version
from bisect_smem.app.cli.main import main
from bisect_smem.core.model import REPORT_SCHEMA, DeviceReport
from bisect_smem.core.profiles import PROFILES
from bisect_smem.core.quantities import json_quantities, quantities
from bisect_smem.core.saved import load_saved
from bisect_smem.core.schema import construct
from tests.conftest import set_optin
from tests.paths import H200_REPORT, ROOT

# These tests read lines whole: a path, then what deviates or regressed.
pytestmark = pytest.mark.usefixtures("wide_terminal")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Every profile at level full and one at level quick, and a real H200's report."""
    folder = tmp_path_factory.mktemp("profiles")
    docs = [json.loads(H200_REPORT.read_text())]
    for key, level in [*((p.key, "full") for p in PROFILES), (PROFILES[0].key, "quick")]:
        path = folder / f"{key}-{level}.json"
        assert main(["--simulate", key, "--level", level, "--quiet", "--json", str(path)]) in (0, 1)
        docs.append(json.loads(path.read_text()))
    return docs


@pytest.fixture(scope="module")
def h200(reports: list[dict]) -> dict:
    return next(d for d in reports if d["devices"][0]["name"].startswith("Simulated sm_90"))


def sparse(value: object) -> object:
    """The JSON without its null fields: what a report of an older version, or by hand, may look like."""
    if isinstance(value, dict):
        return {k: sparse(v) for k, v in value.items() if v is not None}
    return [sparse(v) for v in value] if isinstance(value, list) else value


def sparse_device(raw: dict) -> dict:
    """A device without its null fields, and without the verdicts and searches that quantities never read."""
    dev = {**raw, "verdicts": []}
    if raw.get("measured"):
        dev["measured"] = {**raw["measured"], "searches": {}}
    return sparse(dev)


def both_ways(raw: dict) -> tuple[object, object]:
    """The quantities through DeviceReport and straight from the JSON, or the exception each raises."""
    out = []
    for read in (lambda: quantities(construct(raw, DeviceReport)), lambda: json_quantities(raw)):
        try:
            out.append(read())
        except (KeyError, TypeError, ValueError) as exc:
            out.append(type(exc))
    return out[0], out[1]


def test_quantities_from_the_json_are_those_of_the_device_report(reports: list[dict]) -> None:
    devices = [raw for doc in reports for raw in doc["devices"]]
    devices.append({**devices[0], "measured": None, "error": "worker lost"})
    for raw in [*devices, *map(sparse_device, devices)]:
        rebuilt, straight = both_ways(raw)
        assert rebuilt == straight, raw.get("name")
        if isinstance(straight, dict):
            assert list(rebuilt) == list(straight)
            assert [type(v) for v in rebuilt.values()] == [type(v) for v in straight.values()]
    assert any("measured.validation.march.sms_covered" in both_ways(raw)[1] for raw in devices)


def test_merge_rows_are_those_of_the_loaded_report(reports: list[dict], tmp_path: Path) -> None:
    for n, doc in enumerate(reports):
        path = tmp_path / f"r{n}.json"
        path.write_text(json.dumps(doc))
        report = load_saved(path, (REPORT_SCHEMA,))
        expected = [(f"{path}:{d.index}", report.host, d.name or "unknown", driver_version(d), d.error,
                     tuple((k, merge._hashable(v)) for k, v in quantities(d).items()),
                     d.measured.level if d.measured else None, d.backend) for d in report.devices]
        assert merge.device_rows(str(path)) == expected


def run_merge(paths: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["merge", *paths])
    out = capsys.readouterr()
    return code, out.out, out.err


def write(path: Path, doc: dict, text: bytes | None = None) -> str:
    path.write_bytes(text if text is not None else json.dumps(doc).encode())
    return str(path)


def with_reported(doc: dict, value: object, devices: int = 1) -> dict:
    doc = copy.deepcopy(doc)
    doc["devices"] = [copy.deepcopy(doc["devices"][0]) for _ in range(devices)]
    for i, dev in enumerate(doc["devices"]):
        dev["index"] = i
        dev["reported"]["driver"]["vendor_field"] = value
    return doc


def test_orjson_and_the_standard_parser_merge_alike(h200: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("orjson")
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_merge import write_fleet

    planted = write_fleet(tmp_path, with_reported(h200, 2**62), reports=40, devices=2, deviating=2)
    paths = sorted(str(p) for p in tmp_path.glob("*.json"))
    big = write(tmp_path / "big.json", with_reported(h200, 2**62 + 1))  # one more than the others, exactly
    nan = write(tmp_path / "nan.json", with_reported(h200, float("nan")))  # orjson refuses NaN
    bom = write(tmp_path / "bom.json", {}, b"\xef\xbb\xbf" + json.dumps(with_reported(h200, 2**62)).encode())
    assert merge._orjson is not None
    fast = run_merge([*paths, big, nan, bom], capsys)
    monkeypatch.setattr(merge, "_orjson", None)
    assert run_merge([*paths, big, nan, bom], capsys) == fast
    code, out, _ = fast
    assert code == 1 and f"{big}:0: reported.driver.vendor_field: {2**62 + 1} (majority: {2**62})" in out
    assert f"{nan}:0: reported.driver.vendor_field: nan" in out and f"{bom}:0" not in out
    assert all(f"{label}: measured.optin_dynamic_ceiling_bytes" in out for label in planted)


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_an_integer_beyond_64_bits_is_refused_by_both_parsers(h200: dict, tmp_path: Path, parser: str,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    if parser == "json":
        monkeypatch.setattr(merge, "_orjson", None)
    big = write(tmp_path / "big.json", with_reported(h200, 2**70 + 1))  # orjson alone would read 2**70 + 1.0
    code, out, err = run_merge([big], capsys)
    assert (code, out) == (2, "")
    assert err == (f"error: {big}: field devices[0].reported.driver.vendor_field must be an integer of at most "
                   f"64 bits (got {2**70 + 1})\n")


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_devices_equal_to_python_but_not_in_json_are_each_read(h200: dict, tmp_path: Path, parser: str,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    if parser == "json":
        monkeypatch.setattr(merge, "_orjson", None)
    elif merge._orjson is None:
        pytest.skip("orjson is not installed (the extra fast)")
    doc = with_reported(h200, 1, devices=3)
    doc["devices"][2]["reported"]["driver"]["vendor_field"] = True
    code, out, _ = run_merge([write(tmp_path / "x.json", doc)], capsys)
    assert code == 1 and f"{tmp_path / 'x.json'}:2: reported.driver.vendor_field: True (majority: 1)" in out
    doc["devices"][2]["measured"]["allocation_granularity_bytes"] = 128.0  # == 128 to Python
    path = write(tmp_path / "y.json", doc)
    code, _, err = run_merge([path], capsys)
    assert code == 2
    assert err.strip() == (f"error: {path}: field devices[2].measured.allocation_granularity_bytes must be an "
                           f"integer (got 128.0)")


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(host=5), "host"),
    (lambda d: d["devices"][1].update(name=5), "devices[1].name"),
    (lambda d: d["devices"][1].update(index="1"), "devices[1].index"),
    (lambda d: d["devices"][1].update(context=[]), "devices[1].context"),
    (lambda d: d["devices"][1]["reported"].update(driver=[]), "devices[1].reported.driver"),
    (lambda d: d["devices"][1]["measured"]["residency"][3].update(threads="128"),
     "devices[1].measured.residency[3].threads"),
    (lambda d: d["devices"][1]["measured"]["clusters"][0].update(dsm_verified=1),
     "devices[1].measured.clusters[0].dsm_verified"),
    (lambda d: d["devices"][1]["measured"].update(optin_dynamic_ceiling_bytes=True),
     "devices[1].measured.optin_dynamic_ceiling_bytes"),
])
def test_a_wrongly_typed_field_merge_reads_names_file_and_field(h200: dict, tmp_path: Path, edit, field: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = with_reported(h200, 1, devices=2)
    edit(doc)
    path = write(tmp_path / "bad.json", doc)
    code, out, err = run_merge([path], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and err.startswith(f"error: {path}: field {field} "), err


def test_merge_leaves_the_verdicts_and_run_to_run_figures_unread(h200: dict, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(h200)
    doc["devices"][0]["verdicts"] = "not read"
    doc["devices"][0]["measured"]["timings_s"] = ["not read"]
    code, _, err = run_merge([write(tmp_path / "a.json", doc), write(tmp_path / "b.json", h200)], capsys)
    assert code == 0 and err == ""
    doc["devices"][0]["measured"]["static_splits"][0]["static_bytes"] = -16  # a bound, not a type
    path = write(tmp_path / "c.json", doc)
    code, _, err = run_merge([path], capsys)
    assert code == 2 and err.strip() == (f"error: {path}: device 0: field devices[0].measured.static_splits[0]."
                                         f"static_bytes must be an integer in 0..49152 (got -16)")


@pytest.mark.parametrize(("optins", "majority", "tie"), [
    ([101376, 166912, 200704, 101376, 166912, 101376, 200704], 101376, None),
    ([166912, 101376, 101376, 200704, 166912], None, [166912, 101376]),
])
def test_majority_and_ties_are_weighed_device_by_device(h200: dict, tmp_path: Path, optins: list[int],
                                                        majority: int | None, tie: list[int] | None,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for n, optin in enumerate(optins):
        doc = copy.deepcopy(h200)
        set_optin(doc["devices"][0]["measured"], optin)
        paths.append(write(tmp_path / f"n{n}.json", doc))
    code, out, _ = run_merge(paths, capsys)
    blamed = {line.split(": measured.")[0] for line in out.splitlines() if line.startswith(f"{tmp_path}")}
    assert code == 1
    if majority is not None:
        assert blamed == {f"{p}:0" for p, o in zip(paths, optins, strict=True) if o != majority}
        assert f"(majority: {majority})" in out
    else:
        assert not blamed and f"optin_dynamic_ceiling_bytes: a tie between {', '.join(map(str, tie))};" in out
