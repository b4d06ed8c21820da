"""The registry of fit's library rules: the --rule word -> the rule (rule.py's GemmRule). A third
library is one folder implementing GemmRule and one line here; the fit command, its options and the
fit JSON Schema, and what a trace's explanation says of a kernel, are all read from this table."""

from __future__ import annotations

from typing import Any

from bisect_smem.analysis.fit.cutlass.rule import CutlassRule
from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.analysis.fit.triton.library import TritonRule

RULES: dict[str, GemmRule] = {rule.name: rule for rule in (CutlassRule(), TritonRule())}
DEFAULT_RULE = "cutlass"  # a tile without --rule (and without a library's own message) is CUTLASS's


def recognize(kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
    """What the first rule that knows the kernel by its readable name says of a traced request for it
    (GemmRule.recognize), or None where no rule does."""
    for rule in RULES.values():
        if (lines := rule.recognize(kernel, requested_bytes, target)) is not None:
            return lines
    return None


def gemm_schema() -> dict[str, Any]:
    """The JSON Schema of fit's ``gemm`` object: rule, tiles and stages, and every rule's own fields."""
    properties: dict[str, Any] = {"rule": {"enum": list(RULES)}, "tiles": {"type": "array", "items": {"type": "string"}},
                                  "stages": {"anyOf": [{"type": "integer"}, {"const": "auto"}]}}
    for rule in RULES.values():
        properties.update(rule.json_properties())
    return {"type": ["object", "null"], "properties": properties, "required": ["rule", "tiles", "stages"],
            "description": "The GEMM kernels asked about (--tile), as the rule of --rule counts them "
                           f"({', '.join(RULES)}); or null."}
