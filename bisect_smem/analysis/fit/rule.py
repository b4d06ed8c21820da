"""The interface every library's GEMM rule implements (CUTLASS's, Triton's): the options it adds to
``fit``, the kernels it makes of them, its stage rule and bytes on a target (a FitResult whose ``parts``
say where every byte goes), the line that says what was asked, its JSON fields with their schema, and
what it makes of its kernels where a trace names them.
The fit command reaches a rule only through the registry (rules.py), so a third library is one folder
implementing this and one registry line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, Protocol

from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Labels, Target
from bisect_smem.analysis.fit.tiles import Tile


class GemmRule(Protocol):
    """One library's rule for the shared memory of its GEMM kernel."""

    name: str  # the --rule word: "cutlass"
    library: str  # as a person names it: "CUTLASS"
    version: str  # the release whose arithmetic the rule is, named in every answer
    labels: Labels  # the library's words for what fit shows (its results carry them too)

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """Add the options only this library's kernel takes (their defaults must be None or False)."""

    def given(self, args: argparse.Namespace) -> list[str]:
        """This library's own options that were given, as the user spelled them (``--schedule``)."""

    def kernels(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                stages: int | None) -> tuple[Any, ...]:
        """The kernels asked about, one per tile (``stages`` None: the library's automatic count); every
        bad value is a UsageError naming the option."""

    def listing(self, args: argparse.Namespace, dtype: str | None, stages: int | None) -> Any | None:
        """Without --tile: what to list of the kernels a library's own launcher builds (every bad value a
        UsageError), or None where the options ask for no list."""

    def describe_listing(self, listing: Any) -> str:
        """What is listed, in a line, with the library's version."""

    def candidates(self, listing: Any, target: Target) -> tuple[tuple[Any, ...], str | None]:
        """The kernels ``listing`` names on ``target``'s architecture, and where there are none, why."""

    def candidate_fields(self, kernel: Any) -> tuple[tuple[str, str], ...]:
        """(name, value) pairs that tell one listed kernel from another, the first the one it is sorted by."""

    def evaluate(self, kernel: Any, request: FitRequest, target: Target) -> FitResult:
        """``kernel`` on ``target``: the stage count, every storage's bytes and parts, and the verdict.
        ``request`` holds the static bytes and threads the user gave beside the tile."""

    def describe(self, kernels: Sequence[Any], stages: int | None) -> str:
        """What was asked, in a line: the tile (when one), types, stages, and the library's version."""

    def json_fields(self, kernels: Sequence[Any], stages: int | None) -> dict[str, Any]:
        """The ``gemm`` object of ``fit --json`` besides rule, tiles and stages."""

    def json_properties(self) -> dict[str, Any]:
        """The JSON Schema properties of json_fields."""

    def parse_message(self, text: str) -> Explained | None:
        """The library's own out-of-shared-memory message in ``text`` (Explained with kind = name), or None."""

    def explain_notes(self, kernels: Sequence[Any], explained: Explained,
                      results: Sequence[FitResult]) -> tuple[str, ...]:
        """With --explain and --tile: what the library's message says about these kernels (may be empty)."""

    def recognize(self, kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
        """A traced request by a kernel of this library, known by its readable name (``kernel``): what the
        rule makes of it (its build and bytes beside the ``requested_bytes`` it asked for, on ``target``,
        the GPU it ran on or None), in lines; or why the rule can say nothing of it; None where the name is
        not this library's kernel."""
