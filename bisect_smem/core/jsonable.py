"""Records as JSON: dataclasses as plain values, and the text every file of the tool is written as. Apart
from the report's model, so that commands that write JSON of their own records load no report model."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


def dumps(data: Any) -> str:
    """JSON text as every file of the tool is written: indented, keys sorted, one final newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and dicts as plain JSON values (tuples become lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value
