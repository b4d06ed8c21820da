"""render: the one place text is made from a report. Every format is one module with
``render(report, options) -> str`` over the same structured rows (rows.py: headline, compact and full
rows, from the verdicts' families and parameters; nothing reads a row's text back):

- text: the terminal report; baselines, fleet and profiles: the comparison with baselines, the merged fleet
  and the published table (with their JSON); width: tables and lines laid out within a width;
- markdown: the same report for a bug report;
- json: the report's JSON document;
- plot: the residency staircase and carveout sweep as a picture (png or svg bytes, for ``--plot``);
- prom, nfd, check: for a fleet, the Prometheus textfile, the Node Feature Discovery feature file and the
  one line a node-health agent reads (``--prom``, ``--nfd``, ``export``, ``check``).
- fit: what ``fit`` prints: the answer first, the per-target table, where every byte goes.

``FORMATS`` names each ``--format``, which is the module of that name: a new format is a module and one
word here. A renderer is imported when it is asked for (``renderer``), so that the parser, ``--help`` and
``check`` load none. May import every layer below app and no other wing; never devices.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # deferred: types only, so that importing render loads no renderer
    from bisect_smem.app.render.rows import RenderOptions
    from bisect_smem.core.model import Report

    Renderer = Callable[[Report, RenderOptions], str]

FORMATS = ("text", "markdown", "json")


def renderer(name: str) -> Renderer:
    """The ``render(report, options)`` of the format ``name`` (one of FORMATS)."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; formats: {', '.join(FORMATS)}")
    return importlib.import_module(f"bisect_smem.app.render.{name}").render
