"""The published schemas as files: which kinds there are, and each as the package ships it. Apart from
schemas.py, which generates them from the model, so that ``bisect-smem schema`` reads a file and loads no
model."""

from __future__ import annotations

from importlib import resources

KINDS = ("report", "fit", "baseline", "trace", "profiles", "merge", "check")
VERSIONS = {"trace": 2}  # a kind's version where it is not 1
PACKAGE = "bisect_smem.schemas"


def file_name(kind: str) -> str:
    """``report.v1.json``, ``trace.v2.json``."""
    return f"{kind}.v{VERSIONS.get(kind, 1)}.json"


def published(kind: str) -> str:
    """The published schema of ``kind``, as the package ships it."""
    return resources.files(PACKAGE).joinpath(file_name(kind)).read_text(encoding="utf-8")
