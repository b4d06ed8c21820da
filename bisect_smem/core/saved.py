"""Reading back the tool's own files, reports and baselines, one way for every reader (replay, fit
--target, compare, merge): read by the one reader (core/input.py: regular files only, size-limited,
values of bounded density and numbers of bounded length), parsed, the file's ``schema`` matched against
what the reader takes, every field shape-checked (core/schema.py) and every value checked for what a
device can have (core/plausible.py), then built. Any failure is a BaselineError (exit 2) of one line
naming the file and, where one is at fault, the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bisect_smem.core import input as reader
from bisect_smem.core import plausible
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import BASELINE_SCHEMA, REPORT_SCHEMA, DeviceReport, Report
from bisect_smem.core.schema import SchemaError, build, check

# A device's report at --level full is about 95 KB (an H200's); 16 MiB holds 170 of them, more than any
# host has GPUs even measured by every backend. A file the tool wrote is never larger.
MAX_FILE_BYTES = 16 << 20
_NOUNS = {REPORT_SCHEMA: "report", BASELINE_SCHEMA: "baseline"}
EITHER = (REPORT_SCHEMA, BASELINE_SCHEMA)


@frozen
class Baseline:
    """One saved baseline: where it is, its provenance and the device's report."""

    path: Path
    provenance: dict[str, Any]
    device: DeviceReport


def _noun(schemas: Sequence[str]) -> str:
    return " or ".join(_NOUNS[s] for s in schemas)


def read_bytes(path: Path, schemas: Sequence[str] = EITHER, name: str | None = None) -> bytes:
    """The bytes of ``path``; unreadable or too large is a BaselineError naming it (as ``name``, default the path)."""
    try:
        data = reader.read_file(path, MAX_FILE_BYTES).data
        reader.check_density(data)
        return data
    except reader.InputError as exc:
        raise BaselineError(f"{name or path}: not a readable {_noun(schemas)} ({exc})") from None


def read_json(path: Path, schemas: Sequence[str] = EITHER, name: str | None = None) -> Any:
    """The parsed JSON of ``path``; unreadable, too large or not JSON is a BaselineError naming it."""
    raw = read_bytes(path, schemas, name)
    try:
        return reader.parse_json(raw)
    except reader.InputError as exc:
        raise BaselineError(f"{name or path}: not a readable {_noun(schemas)} ({exc})") from None


def schema_of(data: Any, schemas: Sequence[str], name: str) -> str:
    """The file's ``schema``, one of ``schemas``; anything else is a BaselineError naming the file."""
    found = data.get("schema") if isinstance(data, dict) else type(data).__name__
    if found not in schemas:
        raise BaselineError(f"{name}: not a {' or '.join(schemas)} file (schema: {found!r})")
    return found


def load_saved(path: Path, schemas: Sequence[str] = EITHER, name: str | None = None) -> Report | Baseline:
    """A report or a baseline file (of the kinds in ``schemas``), shape-checked and built."""
    name = name or str(path)
    data = read_json(path, schemas, name)
    if schema_of(data, schemas, name) == REPORT_SCHEMA:
        return build(data, Report, name, values=plausible.check_report)
    return _baseline(Path(path), data, name)


def load_report(path: Path, name: str | None = None) -> Report:
    """One report file, shape-checked and built."""
    name = name or str(path)
    data = read_json(path, (REPORT_SCHEMA,), name)
    schema_of(data, (REPORT_SCHEMA,), name)
    return build(data, Report, name, values=plausible.check_report)


def load_baseline(path: Path, name: str | None = None) -> Baseline:
    """One baseline file, shape-checked and built."""
    name = name or str(path)
    data = read_json(path, (BASELINE_SCHEMA,), name)
    schema_of(data, (BASELINE_SCHEMA,), name)
    return _baseline(Path(path), data, name)


def _baseline(path: Path, data: dict[str, Any], name: str) -> Baseline:
    """The baseline of a document whose schema was checked: provenance (with the driver version) and device."""
    missing = [key for key in ("provenance", "device") if key not in data]
    prov = data.get("provenance")
    missing += ["provenance.driver_version"] if isinstance(prov, dict) and "driver_version" not in prov else []
    if missing:
        raise SchemaError(f"{name}: baseline is incomplete (missing {', '.join(missing)})")
    if not isinstance(prov, dict):
        raise SchemaError(f"{name}: field provenance must be an object (got {type(prov).__name__})")
    if not isinstance(prov["driver_version"], str):
        raise SchemaError(f"{name}: field provenance.driver_version must be a string "
                          f"(got {prov['driver_version']!r})")
    try:
        check(prov, dict[str, Any], "provenance")
        plausible.check_level("provenance.level", prov.get("level"))
        plausible.check_driver_version("provenance.driver_version", prov["driver_version"])
    except SchemaError as exc:
        raise SchemaError(f"{name}: {exc}") from None
    device = build(data["device"], DeviceReport, name, "device", values=lambda d: plausible.check_device(d, "device"))
    return Baseline(path, dict(prov), device)
