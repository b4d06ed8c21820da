"""The toy library's GemmRule: its option, kernels, bytes, words, JSON fields, message and kernel names."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Labels, Target, evaluate
from bisect_smem.analysis.fit.tiles import Tile
from tests.fit.toy import LIBRARY, TOY_VERSION

NAME = re.compile(r"^toy_gemm_(\d+)x(\d+)x(\d+)_d(\d+)$")
LABELS = Labels(stages="depth", count="depth {}", fits="depth {} fits", does_not_fit="depth {} does not fit",
                no_count="no depth", fixed="toy_depth={}", launch="toy bytes", launch_in_full="ToyKernel::bytes",
                derivation="{stage_rule}, {copies} copies", over="ToyError", columns=(("copies", "copies"),))


@dataclass(frozen=True)
class ToyKernel:
    """``depth`` copies of an M x K and an N x K tile of one-byte elements."""

    m: int
    n: int
    k: int
    depth: int

    @property
    def bytes(self) -> int:
        """What its launch asks for."""
        return self.depth * (self.m + self.n) * self.k


class ToyRule:
    """The toy library."""

    name, library, version, labels = "toy", LIBRARY, TOY_VERSION, LABELS

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--toy-depth", metavar="N")

    def given(self, args: argparse.Namespace) -> list[str]:
        return ["--toy-depth"] if args.toy_depth is not None else []

    def kernels(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                stages: int | None) -> tuple[ToyKernel, ...]:
        return tuple(ToyKernel(t.m, t.n, t.k, int(args.toy_depth or 2)) for t in tiles)

    def evaluate(self, kernel: ToyKernel, request: FitRequest, target: Target) -> FitResult:
        total = kernel.bytes
        return replace(evaluate(FitRequest(total, request.static_bytes, request.threads), target),
                       library=self.library, version=self.version, labels=self.labels,
                       tile=f"{kernel.m}x{kernel.n}x{kernel.k}", stages=kernel.depth, stages_requested="auto",
                       stage_rule=f"toy {self.version}", launch_bytes=total, builds=True,
                       parts=[["tiles", total]], details={"copies": 2 * kernel.depth})

    def listing(self, args: argparse.Namespace, dtype: str | None, stages: int | None) -> None:
        return None

    def describe_listing(self, listing: Any) -> str:
        return ""

    def candidates(self, listing: Any, target: Target) -> tuple[tuple[ToyKernel, ...], str | None]:
        return (), "the toy library has no launcher"

    def candidate_fields(self, kernel: ToyKernel) -> tuple[tuple[str, str], ...]:
        return (("tile", f"{kernel.m}x{kernel.n}x{kernel.k}"), ("depth", str(kernel.depth)))

    def describe(self, kernels: Sequence[ToyKernel], stages: int | None) -> str:
        return f"depth {kernels[0].depth}: Toy {self.version}"

    def json_fields(self, kernels: Sequence[ToyKernel], stages: int | None) -> dict[str, Any]:
        return {"toy_depth": kernels[0].depth}

    def json_properties(self) -> dict[str, Any]:
        return {"toy_depth": {"type": "integer"}}

    def parse_message(self, text: str) -> Explained | None:
        found = re.search(r"toy wants (\d+)", text)
        return Explained(self.name, int(found.group(1)), None, ()) if found else None

    def explain_notes(self, kernels: Sequence[ToyKernel], explained: Explained,
                      results: Sequence[FitResult]) -> tuple[str, ...]:
        return ("a toy note",) if explained.kind == self.name else ()

    def recognize(self, kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
        found = NAME.match(kernel)
        if found is None:
            return None
        toy = ToyKernel(*(int(g) for g in found.groups()))
        return (f"fit (toy {self.version}, depth {toy.depth}):",
                f"  {toy.bytes} B, {'the same as asked' if toy.bytes == requested_bytes else 'not what was asked'}")
