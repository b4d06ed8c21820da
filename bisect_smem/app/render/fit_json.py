"""What ``fit --json`` writes (schema FIT_SCHEMA): the request, where its sizes came from, one result per
kernel and target, the note on the targets, a library's kernels (``gemm``), a library's message explained
and, beside it, the stage counts of its tiles (``alternatives``). Made from the same Fit the text is."""

from __future__ import annotations

import json
from typing import Any

from bisect_smem.analysis.fit import FIT_SCHEMA
from bisect_smem.analysis.fit.answer import Fit
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.core.jsonable import to_jsonable


def _gemm(fit: Fit | None) -> dict[str, Any] | None:
    """The library's kernels asked about (its tiles), as its rule counts them; None for a size or a list."""
    if fit is None or fit.rule is None or fit.listing is not None:
        return None
    rule = fit.rule
    return {"rule": rule.name, "tiles": [f"{k.m}x{k.n}x{k.k}" for k in fit.kernels],
            "stages": "auto" if fit.stages is None else fit.stages, **rule.json_fields(fit.kernels, fit.stages)}


def fit_document(fit: Fit, note: str | None, explained: Explained | None = None,
                 tiles: Fit | None = None) -> dict[str, Any]:
    """The JSON document of ``fit``; with ``explained``, ``fit`` is of the size the message names and ``tiles``
    (when given) the tiles whose stage counts are shown beside it."""
    request = {**to_jsonable(fit.request), "total_bytes": fit.request.total_bytes}
    if fit.rule is not None:  # a library's kernels count their own dynamic bytes, one per tile and target
        request.update(dynamic_bytes=None, total_bytes=None)
    if fit.listing is not None:
        none = [f"{target}: none: {why}" for target, why in fit.no_kernels]
        note = "; ".join([*none, *([note] if note else [])]) or None
    return {"schema": FIT_SCHEMA, "request": request, "source": fit.source, "note": note,
            "results": [to_jsonable(r) for r in fit.results], "gemm": _gemm(tiles if explained else fit),
            "explain": to_jsonable(explained), "alternatives": [to_jsonable(r) for r in tiles.results] if tiles else []}


def render_json(fit: Fit, note: str | None, explained: Explained | None = None, tiles: Fit | None = None) -> str:
    """``fit_document`` as the text ``fit --json`` writes: indented, keys sorted."""
    return json.dumps(fit_document(fit, note, explained, tiles), indent=2, sort_keys=True) + "\n"
