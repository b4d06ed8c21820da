"""What ``fit`` answers, as one frozen value: a kernel (a size, or a library's tiles or launcher's list) on
every target asked, one FitResult per kernel and target. The public API returns it and the CLI renders it,
as text or JSON; nothing here reads a file or prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.targets import (
    DOES_NOT_BUILD,
    DOES_NOT_FIT,
    UNKNOWN,
    FitRequest,
    FitResult,
    Target,
    evaluate,
)
from bisect_smem.core.frozen import frozen

FITS = ("fits without opt-in", "fits with opt-in")  # the verdicts of a launch that fits


@frozen
class Fit:
    """A kernel on every target: what was asked (``request``: its bytes and threads; a library's kernel counts
    its own dynamic bytes, so only the static bytes and threads given beside it count there), where the sizes
    came from (``source``, a line), and the results, one per kernel and target. For a library's kernels,
    ``rule`` counted them (``kernels``, one per tile, or a launcher's ``listing``) with ``stages`` (None: the
    library's automatic count); a listing also names its ``targets`` in order and why a target has no kernel
    (``no_kernels``, (target, why) pairs)."""

    request: FitRequest
    results: tuple[FitResult, ...]
    source: str = ""
    rule: GemmRule | None = None
    kernels: tuple[Any, ...] = ()
    stages: int | None = None
    listing: Any = None
    targets: tuple[str, ...] = ()
    no_kernels: tuple[tuple[str, str], ...] = ()

    @property
    def fits(self) -> bool:
        """True when there are results and every one fits (with or without opt-in); a limit that is not
        known, a build the library refuses and a launch over the limit do not."""
        return bool(self.results) and all(r.verdict in FITS for r in self.results)

    @property
    def fitting(self) -> tuple[FitResult, ...]:
        """The results that fit (with or without opt-in): of a launcher's list, the kernels to keep."""
        return tuple(r for r in self.results if r.verdict in FITS)

    @property
    def fails(self) -> bool:
        """True when a result does not fit or does not build somewhere (the command's exit 1)."""
        return any(r.verdict in (DOES_NOT_FIT, DOES_NOT_BUILD) for r in self.results)

    @property
    def unknown(self) -> bool:
        """True when a target's limit is not known, or the rule cannot count the kernel there."""
        return any(r.verdict == UNKNOWN for r in self.results)


def fit_size(request: FitRequest, targets: Sequence[Target], source: str = "") -> Fit:
    """A launch of ``request``'s bytes and threads on every target."""
    return Fit(request, tuple(evaluate(request, t) for t in targets), source)


def fit_kernels(rule: GemmRule, kernels: Sequence[Any], stages: int | None, request: FitRequest,
                targets: Sequence[Target]) -> Fit:
    """Each of ``rule``'s kernels on every target, kernel by kernel; ``request`` holds the static bytes and
    threads given beside them."""
    results = tuple(rule.evaluate(k, request, t) for k in kernels for t in targets)
    return Fit(request, results, rule.describe(kernels, stages), rule, tuple(kernels), stages)


def fit_listed(rule: GemmRule, listing: Any, request: FitRequest, targets: Sequence[Target]) -> Fit:
    """Every kernel ``listing`` names (a launcher's list) on each target's architecture, each result with the
    fields that tell it from the others (``listed_as``)."""
    results: list[FitResult] = []
    none: dict[str, str] = {}
    for t in targets:
        mine, why = rule.candidates(listing, t)
        results += [replace(rule.evaluate(k, request, t), listed_as=dict(rule.candidate_fields(k))) for k in mine]
        if why:
            none[t.short or t.name] = why
    return Fit(request, tuple(results), rule.describe_listing(listing), rule, (), None, listing,
               tuple(t.short or t.name for t in targets), tuple(none.items()))
