"""The published JSON Schemas of the files the tool writes, generated from the dataclasses each is built
from: the report (``bisect_smem/report/v1``), the baseline (``bisect_smem/baseline/v1``), the fit
result (``bisect_smem/fit/v1``), the published table (``bisect_smem/profiles/v1``), the merged fleet
(``bisect_smem/merge/v1``) and the trace summary (``bisect_smem/trace/v2``, in trace_schema.py); the check's
(``bisect_smem/check/v1``), written here from its few fields. ``bisect_smem/schemas/*.vN.json``
holds them as package data; a test
regenerates them and fails when a file and the model drift apart (``make generated`` rewrites them).
"""

from __future__ import annotations

import json
from typing import Any

from bisect_smem.analysis.fit import FIT_SCHEMA
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.rules import gemm_schema
from bisect_smem.analysis.fit.targets import FitRequest, FitResult
from bisect_smem.analysis.merge import Group, Unmeasured, Unreadable
from bisect_smem.app.outputs.trace_schema import trace_schema
from bisect_smem.app.render.check import CHECK_SCHEMA, CHECK_VERDICTS, MAX_LINE_BYTES
from bisect_smem.app.render.fleet import MERGE_SCHEMA
from bisect_smem.app.render.profiles import PROFILES_SCHEMA
from bisect_smem.core.errors import ExitCode
from bisect_smem.core.json_schema import definition_of, document, generate
from bisect_smem.core.levels import LEVELS
from bisect_smem.core.model import BASELINE_SCHEMA, REPORT_SCHEMA, DeviceReport, Report
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.core.quantities import declared
from bisect_smem.core.records import schema_bounds
from bisect_smem.core.rows import VERDICT_KINDS, VERDICTS
from bisect_smem.core.status import RESULTS, STATUSES

# Keywords the annotations cannot say: the values a word may take.
FIELDS: dict[str, dict[str, Any]] = {
    "Report.schema": {"const": REPORT_SCHEMA},
    "Report.level": {"enum": list(LEVELS)},
    "Measured.level": {"enum": list(LEVELS)},
    "Report.result": {"enum": [*RESULTS.values(), None]},
    "Report.exit_code": {"enum": [*RESULTS, None]},
    "Verdict.verdict": {"enum": list(VERDICTS)},
    "Verdict.kind": {"enum": list(VERDICT_KINDS)},
    "DeviceSummary.status": {"enum": list(STATUSES)},
    "Report.created_utc": {"format": "date-time"},
    # The values a device can have, as every reader refuses the others (core/quantities.py declares them).
    **{f"{cls}.{q.name}": {"minimum": q.bounds[0], "maximum": q.bounds[1]}
       for q in declared() for cls in (("Measured",) if q.part == "measured" else ("DeviceAttributes", "DriverAttributes"))},
    **schema_bounds(),  # and the values each record's fields can have (core/records.py declares them)
}
_NULLABLE_INT = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
_NULLABLE_STR = {"anyOf": [{"type": "string"}, {"type": "null"}]}
# A report's result is the word of its exit code (both null in a report written before they were recorded).
RESULT_OF_EXIT_CODE = {"anyOf": [{"properties": {"result": {"const": word}, "exit_code": {"const": int(code)}}}
                                 for code, word in RESULTS.items()]
                       + [{"properties": {"result": {"type": "null"}, "exit_code": {"type": "null"}}}]}
# What analysis/baseline.py provenance() records; saved.py requires driver_version.
PROVENANCE = {
    "type": "object",
    "description": "Who, where and with what the baseline was measured.",
    "properties": {
        "tool_version": {"type": "string"}, "driver_version": {"type": "string"},
        "cuda_driver_version": _NULLABLE_INT, "cuda_runtime_version": _NULLABLE_INT,
        "cupy_version": _NULLABLE_STR, "numba_version": _NULLABLE_STR, "device": _NULLABLE_STR,
        "compute_capability": _NULLABLE_STR, "uuid": _NULLABLE_STR, "host": {"type": "string"},
        "date_utc": {"type": "string", "format": "date-time"}, "backend": {"type": "string"}, "level": {"enum": list(LEVELS)},
    },
    "required": ["driver_version"],
    "additionalProperties": False,
}
def report_schema() -> dict[str, Any]:
    """The report's schema: ``Report`` and everything in it."""
    return {**generate(Report, REPORT_SCHEMA, "bisect-smem report", FIELDS, required=("schema",)),
            **RESULT_OF_EXIT_CODE}


def baseline_schema() -> dict[str, Any]:
    """The baseline's schema: one device's report plus provenance."""
    return document(BASELINE_SCHEMA, "bisect-smem baseline", "One device's report with its provenance, saved by "
                    "--save-baseline as DIR/<gpu-model>/<driver>.json.",
                    {"schema": {"const": BASELINE_SCHEMA}, "provenance": PROVENANCE, "device": DeviceReport},
                    ("schema", "provenance", "device"), FIELDS)


def _fit_request() -> dict[str, Any]:
    request = definition_of(FitRequest)
    request["properties"]["dynamic_bytes"] = dict(_NULLABLE_INT)  # null when it varies by tile or target
    request["properties"]["total_bytes"] = dict(_NULLABLE_INT)
    request["required"] = [*request.get("required", []), "total_bytes"]
    return request


def fit_schema() -> dict[str, Any]:
    """The fit result's schema: the kernel, one result per target (and tile), the GEMM and --explain."""
    return document(FIT_SCHEMA, "bisect-smem fit result", "What `bisect-smem fit --json` writes.",
                    {"schema": {"const": FIT_SCHEMA}, "request": _fit_request(), "source": str,
                     "results": tuple[FitResult, ...], "note": str | None, "gemm": gemm_schema(),
                     "explain": Explained | None, "alternatives": tuple[FitResult, ...]},
                    ("schema", "request", "source", "results", "note", "gemm", "explain", "alternatives"))


def profiles_schema() -> dict[str, Any]:
    """The published table's schema: one object per profile, every field of core/profiles.py's rows."""
    return document(PROFILES_SCHEMA, "bisect-smem profiles", "What `bisect-smem profiles --json` writes: the "
                    "published per-architecture table the simulator and the reference rows use.",
                    {"schema": {"const": PROFILES_SCHEMA}, "profiles": tuple[ArchProfile, ...]}, ("schema", "profiles"))


# merge exits 2 without a document: nothing could be read, or a file was given twice.
MERGE_EXIT_CODES = [int(c) for c in (ExitCode.OK, ExitCode.MISMATCH, ExitCode.NO_GPU, ExitCode.INCOMPLETE)]


def merge_schema() -> dict[str, Any]:
    """The merged fleet's schema: the groups of analysis/merge.py, the reports without a device or not
    read, and the exit code."""
    return document(MERGE_SCHEMA, "bisect-smem merged fleet", "What `bisect-smem merge --json` writes: per GPU "
                    "model, driver and backend the devices, the majority's values, who deviates from them, ties "
                    "and quantities not measured; the reports that list no device or could not be read.",
                    {"schema": {"const": MERGE_SCHEMA}, "exit_code": {"enum": MERGE_EXIT_CODES},
                     "groups": list[Group], "unmeasured": tuple[Unmeasured, ...], "unreadable": tuple[Unreadable, ...]},
                    ("schema", "exit_code", "groups", "unmeasured", "unreadable"))


def check_schema() -> dict[str, Any]:
    """The check's schema: the verdict, the line and the exit code it prints, each verdict tied to its code."""
    codes = sorted(set(CHECK_VERDICTS.values()))
    return {**document(CHECK_SCHEMA, "bisect-smem check", "What `bisect-smem check --json` writes: the verdict, "
                       "line and exit code the check prints, for the report at `report`.",
                       {"schema": {"const": CHECK_SCHEMA}, "report": {"type": "string"},
                        "verdict": {"enum": list(CHECK_VERDICTS)}, "exit_code": {"enum": codes},
                        "line": {"type": "string", "maxLength": MAX_LINE_BYTES}},
                       ("schema", "report", "verdict", "exit_code", "line")),
            "anyOf": [{"properties": {"verdict": {"enum": [v for v, c in CHECK_VERDICTS.items() if c == code]},
                                      "exit_code": {"const": code}}} for code in codes]}


def generated() -> dict[str, dict[str, Any]]:
    """Every schema, by kind, as generated from the model now."""
    return {"report": report_schema(), "fit": fit_schema(), "baseline": baseline_schema(),
            "trace": trace_schema(), "profiles": profiles_schema(), "merge": merge_schema(),
            "check": check_schema()}


def text(schema: dict[str, Any]) -> str:
    """A schema as it is published: indented, keys sorted, one final newline."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
