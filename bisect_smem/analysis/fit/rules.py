"""The registry of fit's library rules: the --rule word -> the rule (rule.py's GemmRule). A third
library is one folder implementing GemmRule and one line here; the fit command, its options and the
fit JSON Schema are all read from this table."""

from __future__ import annotations

from typing import Any

from bisect_smem.analysis.fit.cutlass.rule import CutlassRule
from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.triton.library import TritonRule

RULES: dict[str, GemmRule] = {rule.name: rule for rule in (CutlassRule(), TritonRule())}
DEFAULT_RULE = "cutlass"  # a tile without --rule (and without a library's own message) is CUTLASS's



def gemm_schema() -> dict[str, Any]:
    """The JSON Schema of fit's ``gemm`` object: rule, tiles and stages, and every rule's own fields."""
    properties: dict[str, Any] = {"rule": {"enum": list(RULES)}, "tiles": {"type": "array", "items": {"type": "string"}},
                                  "stages": {"anyOf": [{"type": "integer"}, {"const": "auto"}]}}
    for rule in RULES.values():
        properties.update(rule.json_properties())
    return {"type": ["object", "null"], "properties": properties, "required": ["rule", "tiles", "stages"],
            "description": "The GEMM kernels asked about (--tile), as the rule of --rule counts them "
                           f"({', '.join(RULES)}); or null."}
