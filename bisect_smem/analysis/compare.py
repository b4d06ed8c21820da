"""How one row is judged: a measured value against a limit (``compare``) or against a prediction
(``predicted``), and a row made from its parts (``row``). Every verdict module builds its rows here.

A row is ``match`` only when the measured number is exact and its search was trustworthy (boundary
confirmed, monotone, within its probe bound): an untrustworthy search is an ERROR row, never a match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bisect_smem.core.model import Ceiling
from bisect_smem.core.rows import (
    NO_PARAMETERS,
    Conclusion,
    Family,
    Note,
    NoteKind,
    RowParameters,
    Verdict,
    VerdictKind,
    join_notes,
)

NoteLike = Note | str


def row(quantity: str, reported: Any, source: str | None, measured: Any, verdict: Conclusion,
        notes: Sequence[NoteLike] = (), kind: VerdictKind = VerdictKind.LIMIT, family: Family = Family.OTHER,
        parameters: RowParameters = NO_PARAMETERS, search: Ceiling | None = None, **lists: tuple[str, ...]) -> Verdict:
    """A row from its parts; a plain string note is a remark. ``search`` gives its probe count and bound,
    ``lists`` its ``reported_items`` and ``measured_items``."""
    parts = tuple(n if isinstance(n, Note) else Note(n) for n in notes)
    return Verdict(quantity, reported, source, measured, verdict, join_notes(parts), kind, family, parameters, parts,
                   search.probes if search else None, search.probe_bound if search else None, **lists)


def with_notes(v: Verdict, notes: Sequence[NoteLike], verdict: Conclusion | None = None) -> Verdict:
    """``v`` with other notes (and another verdict)."""
    parts = tuple(n if isinstance(n, Note) else Note(n) for n in notes)
    return replace(v, verdict=verdict or v.verdict, note=join_notes(parts), notes=parts)


def search_problem(search: Ceiling) -> str | None:
    """Why a search's number cannot be trusted, or None."""
    if search.error:
        return search.error
    if search.unstable_range_bytes:
        lo, hi = search.unstable_range_bytes
        return "unstable: " + (f"{lo} B both launched and failed" if lo == hi else
                               f"failures from {lo} B, successes up to {hi} B")
    if search.non_monotone_at_bytes:
        return f"not monotone: failed at {list(search.non_monotone_at_bytes)} B below the ceiling"
    return None


def compare(quantity: str, reported: Any, source: str | None, measured: Any, search: Ceiling | None = None,
            note: str = "", kind: VerdictKind = VerdictKind.LIMIT, family: Family = Family.OTHER,
            parameters: RowParameters = NO_PARAMETERS) -> Verdict:
    """A measured value against a limit: equal is ``match``, different is ``MISMATCH``, nothing to compare
    is ``info``, and a search that cannot be trusted is ``ERROR``."""
    about = {"kind": kind, "family": family, "parameters": parameters, "search": search}
    notes: list[Note] = [Note(note)] if note else []
    if search is not None:
        problem = search_problem(search)
        if problem:
            return row(quantity, reported, source, measured, Conclusion.ERROR, [problem], **about)
        if search.at_cap and isinstance(measured, int) and isinstance(reported, int) and reported > measured:
            # Every probe up to the cap launched: the ceiling is at least the cap, so a larger reported
            # value is neither confirmed nor contradicted. Not measured, never a MISMATCH.
            return row(quantity, reported, source, None, Conclusion.ERROR,
                       [f"at the {measured} B search cap, not measured: at least {measured} B launched"], **about)
        if search.at_cap:
            notes.append(Note("reached the search cap: the real ceiling may be higher"))
        notes.append(Note(f"{search.probes} probes (bound {search.probe_bound})", NoteKind.PROBES))
        if search.probes > search.probe_bound:
            notes.append(Note("over the probe bound"))
    if measured is None:
        return row(quantity, reported, source, None, Conclusion.ERROR if search is not None else Conclusion.INFO,
                   notes or ["not measured"], **about)
    if reported is None:
        return row(quantity, None, source, measured, Conclusion.INFO, notes or ["nothing reported to compare"], **about)
    if reported == measured:
        return row(quantity, reported, source, measured, Conclusion.MATCH, notes, **about)
    diff = measured - reported if isinstance(measured, int) and isinstance(reported, int) else None
    if diff is not None:
        notes.insert(0, Note(f"measured {'+' if diff > 0 else ''}{diff} B against reported"))
    return row(quantity, reported, source, measured, Conclusion.MISMATCH, notes, **about)


def predicted(quantity: str, api: int | None, source: str, low: int | None, high: int | None = None,
              notes: Sequence[NoteLike] = (), family: Family = Family.OTHER,
              parameters: RowParameters = NO_PARAMETERS) -> Verdict:
    """A count the API predicts against what ran: fewer is MISMATCH, more is ``differs``."""
    high = low if high is None else high
    measured: int | str | None = low if low == high else f"{low}..{high}"
    about = {"kind": VerdictKind.PREDICTION, "family": family, "parameters": parameters}
    parts = list(notes)
    if low is None or high is None:
        return row(quantity, api, source, None, Conclusion.INFO, parts or ["not measured"], **about)
    if api is None:
        return row(quantity, None, source, measured, Conclusion.INFO, parts or ["no prediction to compare"], **about)
    if low < api:
        parts.insert(0, f"{api - low} fewer than the API: a grid sized by it would wait")
        return row(quantity, api, source, measured, Conclusion.MISMATCH, parts, **about)
    if high > api:
        parts.insert(0, Note(f"{high - api} more than the API", NoteKind.BEYOND_PREDICTION))
        return row(quantity, api, source, measured, Conclusion.DIFFERS, parts, **about)
    return row(quantity, api, source, measured, Conclusion.MATCH, parts, **about)
