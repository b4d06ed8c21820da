"""render: the one place text is made from a report. Every format is one module with
``render(report, options) -> str`` over the same structured rows (rows.py: headline, compact and full
rows, from the verdicts' families and parameters; nothing reads a row's text back):

- text: the terminal report, and the comparison with baselines, the merged fleet and the profiles;
- markdown: the same report for a bug report;
- json: the report's JSON document;
- plot: the residency staircase and carveout sweep as a picture (png or svg bytes, for ``--plot``);
- prom, nfd, check: for a fleet, the Prometheus textfile, the Node Feature Discovery feature file and the
  one line a node-health agent reads (``--prom``, ``--nfd``, ``export``, ``check``).
- fit: what ``fit`` prints: the answer first, the per-target table, where every byte goes.

``FORMATS`` maps each ``--format`` name to its renderer: a new format is a module and one line here.
May import every layer below app.
"""

from __future__ import annotations

from collections.abc import Callable

from bisect_smem.app.render import json, markdown, text
from bisect_smem.app.render.rows import RenderOptions
from bisect_smem.core.model import Report

Renderer = Callable[[Report, RenderOptions], str]
FORMATS: dict[str, Renderer] = {
    "text": text.render,
    "markdown": markdown.render,
    "json": json.render,
}
