"""``fit`` without --tile, where a library's rule lists every kernel its launcher builds (CUTLASS's
``--launcher trtllm-moe``): each listed kernel on every target, as one table per target or as JSON, and the
exit code. Called by fit.py only."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from bisect_smem.analysis.fit import FIT_SCHEMA
from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.targets import FitRequest, FitResult
from bisect_smem.app.outputs import writer
from bisect_smem.app.render.fit import render_listing
from bisect_smem.app.run import fit_targets
from bisect_smem.core.model import to_jsonable


def listing_answer(query: Any, rule: GemmRule, listing: Any) -> tuple[str, list[FitResult]]:
    """Every kernel ``listing`` names (``rule``'s list of a launcher's kernels) on every target of ``query``
    (the fit command's FitQuery), each a result with the fields that tell it from the others (``listed_as``):
    the table (or JSON) to print, and the results the exit code is made of."""
    request = FitRequest(0, query.static or 0, query.threads)
    json_path = writer.output_path(query.json, "the result")
    found, note = fit_targets.targets(query.profiles, query.target_files, query.simulate, query.local)
    results, none = [], {}
    for t in found:
        mine, why = rule.candidates(listing, t)
        results += [replace(rule.evaluate(k, request, t), listed_as=dict(rule.candidate_fields(k))) for k in mine]
        if why:
            none[t.short or t.name] = why
    notes = "; ".join([*(f"{target}: none: {why}" for target, why in none.items()), *([note] if note else [])])
    data = {"schema": FIT_SCHEMA, "request": {**to_jsonable(request), "dynamic_bytes": None, "total_bytes": None},
            "source": rule.describe_listing(listing), "note": notes or None,
            "results": [to_jsonable(r) for r in results], "gemm": None, "explain": None, "alternatives": []}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if json_path is not None:
        writer.write_atomic(json_path, text)
    if query.json == "-":
        return text, results
    body = render_listing(data["source"], results, [t.short or t.name for t in found], none)
    return "\n".join([body, *([note] if note else [])]) + "\n", results
