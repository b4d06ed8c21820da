"""The report as its JSON document (``bisect_smem/report/v1``): every field, keys sorted, one final
newline, as every file of the tool is written."""

from __future__ import annotations

from bisect_smem.app.render.rows import DEFAULT_OPTIONS, RenderOptions
from bisect_smem.core.jsonable import dumps
from bisect_smem.core.model import Report


def render(report: Report, options: RenderOptions = DEFAULT_OPTIONS) -> str:
    """The JSON document; the options of the tables do not apply to it."""
    return dumps(report.to_dict())
