"""A recorded trace folder explained: its requests read, their kernel names demangled, and each explained
against the limits recorded with it (or given) and the other targets; and the record of those limits kept
beside the trace, so that ``trace --from`` (and the public API) explain it the same way on any machine. Says
nothing: what could not be read is in the explanation (``skipped``), for the caller to say."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bisect_smem.analysis.fit.targets import Target, target_from_record, target_record
from bisect_smem.analysis.trace import Explained, explain
from bisect_smem.core import input as reader
from bisect_smem.core.errors import UsageError
from bisect_smem.core.trace_read import read_trace

# The limits a trace was explained against, kept beside its JSON lines: --from explains it the same way on any
# machine, rather than against whatever GPU that machine has.
LIMITS_FILE = "limits.json"
LIMITS_FORMAT = 1
MAX_LIMITS_FILE_BYTES = 1 << 20


def limits_document(here: Target) -> str:
    """The text of LIMITS_FILE recording ``here``: what ``recorded_limits`` reads back."""
    return json.dumps({"format": LIMITS_FORMAT, "here": target_record(here)}, indent=1) + "\n"


def recorded_limits(folder: Path) -> tuple[Target | None, str | None]:
    """The limits recorded with the trace in ``folder``; None, and why, where it has none. A record that
    cannot be read is a UsageError naming the file."""
    path = folder / LIMITS_FILE
    if not path.exists():
        return None, "no limits were recorded with this trace: give --report or --simulate"
    try:
        document = reader.parse_json(reader.read_file(path, MAX_LIMITS_FILE_BYTES).data)
    except reader.InputError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != LIMITS_FORMAT or set(document) != {"format", "here"}:
        raise UsageError(f"{path}: not the limits trace records (format {LIMITS_FORMAT})")
    here = target_from_record(document["here"], str(path))
    return here, f"limits as recorded with the trace, in {LIMITS_FILE}"


def explain_folder(folder: Path, here: Target | None, others: Sequence[Target]) -> Explained:
    """The trace under ``folder``, read, demangled and explained against ``here`` (the GPU it ran on, or None)
    and ``others``; the lines and files that could not be read are counted in its ``skipped``."""
    return explain(read_trace(folder), here, list(others))
