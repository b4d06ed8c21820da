"""What ``fit`` shows: the answer on the first line, then (for several targets or --verbose) the table,
and for a GEMM kernel where every byte goes, every line within the width it is given (a table's widest
columns wrap within their cells, a longer line wraps at spaces). Text only; cli/main.py prints it."""

from __future__ import annotations

import dataclasses
from typing import Any

from tabulate import tabulate

from bisect_smem.analysis.fit.answer import Fit
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import DOES_NOT_BUILD, DOES_NOT_FIT, UNKNOWN, FitRequest, FitResult, Labels
from bisect_smem.app.render.width import DEFAULT_WIDTH, table, wrapped
from bisect_smem.core.text import dash


def _table(rows: list[tuple[Any, ...]], headers: tuple[str, ...], width: int,
           colalign: tuple[str, ...] | None = None) -> str:
    """tabulate's table where it fits ``width``; else one whose widest columns wrap within their cells."""
    text = tabulate(rows, headers=headers, colalign=colalign, disable_numparse=True)
    if max(map(len, text.splitlines()), default=0) <= width:
        return text
    return table([tuple(map(str, row)) for row in rows], headers, width)


def render_fit(fit: Fit, note: str | None, width: int = DEFAULT_WIDTH, verbose: bool = False) -> str:
    """A fit as a person reads it: the answer first, then the table and the notes (``note``: about the
    targets), every line within ``width``."""
    if fit.listing is not None:
        body = render_listing(fit.source, list(fit.results), list(fit.targets), dict(fit.no_kernels), width)
        return wrapped("\n".join([body, *([note] if note else [])]), width) + "\n"
    if fit.rule is not None:
        body = render_gemm(fit.source, list(fit.results), verbose, width)
    else:
        body = render(fit.request, fit.source, list(fit.results), verbose, width)
    return _with_notes(body, fit, note, width)


def render_explained(fit: Fit, explained: Explained, tiles: Fit | None, note: str | None, width: int = DEFAULT_WIDTH,
                     notes: tuple[str, ...] = (), library: str | None = None, labels: Labels | None = None) -> str:
    """A library's shared-memory error (``fit`` of the size it asked for) and, with ``tiles``, the stage counts
    of those tiles that fit; ``library`` is whose message or tiles these are, ``labels`` its words."""
    body = render_explain(fit.request, explained, list(fit.results), list(tiles.results) if tiles else [], notes,
                          library, labels, width)
    return _with_notes(body, fit, note, width)


def _with_notes(body: str, fit: Fit, note: str | None, width: int) -> str:
    """``body``, then why a target's limit is unknown (once each) and ``note``, every line within ``width``."""
    failures = [f"{r.target}: limit unknown: {r.error}" for r in fit.results
                if r.verdict == UNKNOWN and r.optin_limit_bytes is None]
    return wrapped("\n".join([body, *dict.fromkeys(failures), *([note] if note else [])]), width) + "\n"


def margin(r: FitResult) -> str:
    """``over by N`` or ``N to spare`` against the opt-in limit."""
    if r.over_bytes is None:
        return "-"
    return f"over by {r.over_bytes}" if r.over_bytes > 0 else f"{-r.over_bytes} to spare"


def _head(request: FitRequest, source: str) -> str:
    return (f"kernel: {request.dynamic_bytes} B dynamic + {request.static_bytes} B static = {request.total_bytes} B "
            f"per block, {request.threads} threads" + (f" ({source})" if source else ""))


def short_name(r: FitResult) -> str:
    """``sm_120``, ``device 0``, or a measured model with its driver."""
    return r.target_short or r.target


def answer(r: FitResult) -> str:
    """One target's answer in a sentence: fits, with which margin, or why not."""
    where = short_name(r)
    if r.verdict == UNKNOWN:
        return f"{where}: limit unknown"
    if r.verdict == DOES_NOT_FIT:
        return f"{where}: does not fit: {r.total_bytes} B against {r.optin_limit_bytes} B, over by {r.over_bytes} B"
    how = "without opt-in" if r.verdict == "fits without opt-in" else "with opt-in"
    return f"{where}: fits {how}: {r.total_bytes} of {r.optin_limit_bytes} B, {dash(r.blocks_per_sm)} block(s)/SM"


def render(request: FitRequest, source: str, results: list[FitResult], verbose: bool = False,
           width: int = DEFAULT_WIDTH) -> str:
    """One size against every target: the answer line, then (several targets, --verbose) the table."""
    lines = ["; ".join(answer(r) for r in results) or "no targets",
             _head(request, source)]
    if verbose or len(results) > 1:
        rows = [(r.target, r.kind, r.verdict, dash(r.optin_limit_bytes), margin(r), dash(r.blocks_per_sm))
                for r in results]
        lines.append(_table(rows, ("target", "limits", "verdict", "opt-in limit B", "margin B", "blocks/SM"), width))
    return "\n".join(lines)


def words(r: FitResult) -> Labels:
    """The result's library's words (plain ones for a result that names none)."""
    return r.labels or Labels()


def gemm_answer(r: FitResult) -> str:
    """A library's kernel on one target, in its words: "3 stages fit on sm_120: 97280 of 101376 B; 4 would
    need 124928 B", "num_stages 3 fits on sm_90: ..."."""
    where, w = short_name(r), words(r)
    if r.launch_bytes is None:
        return f"{where}: {w.no_count}: {r.build_reason}"
    if r.verdict == DOES_NOT_BUILD:
        return (f"{where}: does not build: {r.build_reason} ({r.stages} stage(s) of {r.stage_bytes} B, "
                f"{r.launch_bytes} B)")
    if r.verdict == UNKNOWN:
        asked = f", {_asked(r)}" if r.stages is not None else ""
        return f"{where}: {w.count.format(dash(r.stages))}{asked}; limit unknown"
    if r.verdict == DOES_NOT_FIT:
        return _does_not_fit(r, where)
    more = f"; {r.stages + 1} would need {r.next_stage_bytes} B" if r.next_stage_bytes else ""
    return f"{w.fits.format(r.stages)} on {where}: {_asked(r, ' of')} {r.optin_limit_bytes} B{more}"


def _asked(r: FitResult, joint: str = "") -> str:
    """The launch's bytes as counted against the limit: the library's count, and the --static bytes beside it."""
    static = r.total_bytes - (r.launch_bytes or 0)
    if not static:
        return f"{r.launch_bytes}{joint or ' B'}"
    return f"{r.launch_bytes} B + {static} B static{joint}"


def _does_not_fit(r: FitResult, where: str) -> str:
    """A build over the limit: whose stage count it was (the library's automatic count overflowing its own
    capacity, said so), by how much, what the library does then, and what would fit instead."""
    w = words(r)
    if r.auto_rule_overflows:
        head = (f"{r.library} {r.version}'s auto rule picks {w.count.format(r.stages)}; the kernel needs "
                f"{_asked(r)} against {r.optin_limit_bytes} B on {where}: over by {r.over_bytes} B. {w.overflow}")
    else:
        head = (f"{w.does_not_fit.format(r.stages)} on {where}: {_asked(r)} against "
                f"{r.optin_limit_bytes} B, over by {r.over_bytes} B" + (f" ({w.over})" if w.over else "."))
    instead = []
    if r.fitting_stages is not None:
        instead.append(f"{w.fits.format(r.fitting_stages)} ({w.fixed.format(r.fitting_stages)}: {r.fitting_bytes} B)")
    for name, key in w.variants:
        if (size := (r.details or {}).get(key)) is not None:
            instead.append(f"{'so does ' if instead else ''}{name} ({size} B){'' if instead else ' fits'}")
    return f"{head} {', and '.join(instead)}." if instead else head


def breakdown(r: FitResult) -> list[str]:
    """Where every byte of one build goes, and against which limit."""
    if not r.parts:
        return []
    w = words(r)
    fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    lines = [f"{short_name(r)}: {r.launch_bytes} B = {w.launch_in_full} "
             f"({w.derivation.format(**fields, **(r.details or {}))})"]
    lines += [f"  {bytes_:>7} B  {name}" for name, bytes_ in r.parts]
    if r.optin_limit_bytes is not None:
        lines.append(f"  against the opt-in limit {r.optin_limit_bytes} B: {margin(r)}")
    return lines


def render_gemm(source: str, results: list[FitResult], verbose: bool, width: int = DEFAULT_WIDTH) -> str:
    """A library's kernels: one answer per target (the first line is the first), then where the bytes go."""
    lines = [gemm_answer(r) for r in results]
    tiles = list(dict.fromkeys(r.tile for r in results))
    if len(tiles) > 1:
        lines = [f"{r.tile}: {line}" for r, line in zip(results, lines, strict=True)]
    lines += dict.fromkeys(f"{short_name(r)}: {note}" for r in results for note in r.notes)
    lines.append(f"kernel: {source}" if source else "kernel:")
    if verbose or len(results) > 1:
        w = words(results[0])
        rows = [(r.tile, r.target, stages_cell(r), dash(r.stage_bytes), dash(r.mainloop_bytes),
                 dash(r.epilogue_bytes), *(dash((r.details or {}).get(key)) for _, key in w.columns),
                 dash(r.launch_bytes), dash(r.optin_limit_bytes), margin(r) if r.launch_bytes else "-")
                for r in results]
        lines.append(_table(rows, ("tile", "target", w.stages, "B/stage", "mainloop B", "epilogue B",
                                   *(head for head, _ in w.columns), f"{w.launch} B", "opt-in limit B", "margin B"),
                            width))
    shown = results if verbose or len(results) <= 3 else results[:1]
    for r in shown:
        lines += breakdown(r)
    return "\n".join(lines)


def stages_cell(r: FitResult) -> str:
    """A stage count as a person reads it: ``4``, ``0: does not fit``, ``?`` when the limit is unknown."""
    if r.stages is None:
        return "-"
    if r.verdict == DOES_NOT_BUILD:
        return f"{r.stages}: does not build"
    if r.verdict == DOES_NOT_FIT:
        # Only counts that fit are suggested: the most StageCount<S> under the limit, or none.
        return f"{r.fitting_stages} (auto {r.stages} is over)" if r.fitting_stages else f"none ({r.stages} is over)"
    return "?" if r.verdict == UNKNOWN else str(r.stages)


def render_explain(request: FitRequest, explained: Explained, results: list[FitResult],
                   alternatives: list[FitResult], notes: tuple[str, ...] = (), library: str | None = None,
                   labels: Labels | None = None, width: int = DEFAULT_WIDTH) -> str:
    """A library's shared-memory error: by how much it is over on which target, and what the tile allows.
    ``library`` is whose message or tiles these are, ``labels`` its words."""
    need = explained.required_bytes
    if explained.hardware_limit_bytes is not None:
        limit = explained.hardware_limit_bytes
        over = f"over by {need - limit} B" if need > limit else f"{limit - need} B to spare"
        lines = [f"{library}: the kernel needs {need} B of shared memory; the GPU it ran on allows {limit} B: "
                 f"{over}."]
        if explained.limit_matches:
            lines.append(f"{limit} B is the published opt-in limit of {', '.join(explained.limit_matches)}.")
        else:
            lines.append(f"{limit} B is no published opt-in limit (a MIG slice or a virtual GPU may give less).")
    elif labels is not None and labels.size:
        lines = [f"the kernel needs {need} B of shared memory per block ({labels.size})."]
    else:
        lines = [f"the kernel needs {need} B of shared memory per block ({library}'s tiles below)."]
    lines += notes
    tiles = list(dict.fromkeys(str(a.tile) for a in alternatives))
    by_target: dict[tuple[str, str], FitResult] = {(a.target, str(a.tile)): a for a in alternatives}
    rows = []
    for r in results:
        extra = [stages_cell(by_target[(r.target, t)]) for t in tiles]
        rows.append((r.target, r.kind, dash(r.optin_limit_bytes), r.verdict, margin(r), *extra))
    word = (labels or Labels()).stages
    headers = ("target", "limits", "opt-in limit B", "verdict", "margin B", *(f"{t} {word} that fit" for t in tiles))
    lines.append(_table(rows, headers, width))
    if request.static_bytes:
        lines.append(f"with {request.static_bytes} B static")
    return "\n".join(lines)


def _outcome(r: FitResult) -> tuple[Any, ...]:
    """What a listed kernel comes to on its target: rows equal in this are merged."""
    return r.stages, r.launch_bytes, r.verdict, r.over_bytes, r.build_reason


def merge_labels(rows: list[tuple[dict[str, str], FitResult]]) -> list[tuple[dict[str, str], FitResult]]:
    """Rows that differ in one label only and come to the same outcome, as one row whose label reads
    ``fp16/bf16``; every label but the first (the one rows are sorted by) is merged, the last first."""
    names = list(rows[0][0]) if rows else []
    merged = [({n: (v,) for n, v in labels.items()}, r) for labels, r in rows]
    for name in reversed(names[1:]):
        groups: dict[tuple[Any, ...], tuple[list[str], FitResult, dict[str, tuple[str, ...]]]] = {}
        for labels, r in merged:
            key = (tuple((n, v) for n, v in labels.items() if n != name), _outcome(r))
            values, _, _ = groups.setdefault(key, ([], r, labels))
            values.extend(v for v in labels[name] if v not in values)
        merged = [({**labels, name: tuple(values)}, r) for values, r, labels in groups.values()]
    return [({n: "/".join(v) for n, v in labels.items()}, r) for labels, r in merged]


def _listed_cell(r: FitResult) -> str:
    """A listed kernel's margin, or why it has none."""
    if r.verdict == DOES_NOT_BUILD:
        return f"does not build: {r.build_reason}"
    if r.verdict == UNKNOWN:
        return r.build_reason or "limit unknown"
    return margin(r)


def render_listing(source: str, listed: list[FitResult], targets: list[str], none: dict[str, str],
                   width: int = DEFAULT_WIDTH) -> str:
    """Every kernel a launcher builds, one table per target: the fields that tell them apart (those equal on
    every row in the line above it), the stages, what the launch asks for and the margin; rows that come to
    the same are merged. ``none``: why a target has none."""
    lines = []
    for target in targets:
        mine = [(dict(r.listed_as or {}), r) for r in listed if short_name(r) == target]
        if not mine:
            lines.append(f"{target}: none: {none.get(target, 'no such kernel')}")
            continue
        first = mine[0][1]
        rows = merge_labels(mine)
        fixed = [n for n in rows[0][0] if len({labels[n] for labels, _ in rows}) == 1]
        lines.append(f"{target}: {len(mine)} kernels ({', '.join(f'{n} {rows[0][0][n]}' for n in fixed)})")
        w = words(first)
        over = [r for _, r in mine if r.verdict == DOES_NOT_FIT]
        if over:
            # The library's words for its automatic count overflowing: "It compiles and fails ..." of each.
            said = w.overflow.rstrip(".")
            why = f", each: {said[:1].lower()}{said[1:]}" if said and all(r.auto_rule_overflows for r in over) else ""
            lines.append(f"{len(over)} over the opt-in limit of {first.optin_limit_bytes} B{why}")
        if refused := sum(r.verdict == DOES_NOT_BUILD for _, r in mine):
            lines.append(f"{refused} do not build")
        shown_names = [n for n in rows[0][0] if n not in fixed]
        cells = [(*(labels[n] for n in shown_names), dash(r.stages), dash(r.launch_bytes), _listed_cell(r))
                 for labels, r in rows]
        lines.append(_table(cells, (*shown_names, w.stages, f"{w.launch} B", "margin B"), width,
                            (*("left" for _ in shown_names), "right", "right", "left")))
    lines.append(f"kernels: {source}")
    return "\n".join(lines)
