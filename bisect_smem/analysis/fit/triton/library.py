"""Triton's matmul behind fit's rule interface: its options (num_warps), the kernels they make, the
stage rule and metadata.shared (rule.py), Triton's OutOfResources message, its JSON fields, and its kernels
in a trace, known by Triton's cache (cache.py)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Labels, Target, check_bound
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.analysis.fit.triton import B_LAYOUTS, LIBRARY, LOADS, TRITON_VERSION, WARPS, cache
from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import DEFAULT_SMEM_PER_BLOCK_BYTES
from bisect_smem.core.profiles import PROFILES, parse_cc
from bisect_smem.core.sizes import parse_count

if TYPE_CHECKING:  # deferred for type checkers only: the kernel's class lives with the arithmetic
    from bisect_smem.analysis.fit.triton.rule import TritonKernel

# Triton's OutOfResources text. Numbers are ASCII digits; more than MAX_DIGITS is refused by parse_count.
MESSAGE = re.compile(r"Required:\s*(\S+?)\s*,\s*Hardware limit:\s*(\S+?)(?=[\s.,;)]|$)", re.IGNORECASE)
OPTIONS = (("--warps", "warps"), ("--b-layout", "b_layout"), ("--loads", "loads"))


class TritonRule:
    """Triton's tutorial matmul as TRITON_VERSION compiles it."""

    name = "triton"
    library = LIBRARY
    version = TRITON_VERSION

    @property
    def labels(self) -> Labels:
        """Triton's words for what fit shows (num_stages, metadata.shared)."""
        return _arithmetic().LABELS

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """--warps, --b-layout, --loads."""
        parser.add_argument("--warps", metavar="N", help=f"Triton's num_warps: {', '.join(map(str, WARPS))} "
                                                         "(default 4)")
        parser.add_argument("--loads", choices=LOADS, help="how the kernel loads A and B: pointer (tl.load of pointer "
                            "blocks, the tutorial's matmul; the default) or descriptor (tensor descriptors, TMA; "
                            "fp16 and bf16 on sm_90 on, else answered as not modelled)")
        parser.add_argument("--b-layout", choices=B_LAYOUTS, help="how B is stored: k (K-major, N x K; the default "
                            "for fp8, as Triton's fp8 examples store it) or n (N-major, K x N; the default otherwise)")

    def given(self, args: argparse.Namespace) -> list[str]:
        """Triton's options that were given."""
        return [option for option, dest in OPTIONS if getattr(args, dest, None) is not None]

    def kernels(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                stages: int | None) -> tuple[TritonKernel, ...]:
        """One TritonKernel per tile: fp16 and 4 warps unless given."""
        rule = _arithmetic()
        kind = rule.triton_dtype(dtype or "fp16")
        warps = parse_count(args.warps, "--warps") if args.warps is not None else 4
        return tuple(rule.TritonKernel(t.m, t.n, t.k, kind, stages, warps, args.b_layout, args.loads or "pointer")
                     for t in tiles)

    def listing(self, args: argparse.Namespace, dtype: str | None, stages: int | None) -> None:
        """Triton has no launcher whose kernels could be listed: None."""
        return None

    def describe_listing(self, listing: Any) -> str:
        """No list: nothing to describe."""
        return ""

    def candidates(self, listing: Any, target: Target) -> tuple[tuple[TritonKernel, ...], str | None]:
        """No list: none."""
        return (), "Triton has no launcher whose kernels are listed"

    def candidate_fields(self, kernel: TritonKernel) -> tuple[tuple[str, str], ...]:
        """The tile, type and num_warps."""
        return (("tile", f"{kernel.m}x{kernel.n}x{kernel.k}"), ("dtype", kernel.dtype), ("warps", str(kernel.warps)))

    def evaluate(self, kernel: TritonKernel, request: FitRequest, target: Target) -> FitResult:
        """metadata.shared on the target; the block is num_warps x 32 threads, all of it dynamic."""
        return _arithmetic().evaluate_triton(kernel, target)

    def describe(self, kernels: Sequence[TritonKernel], stages: int | None) -> str:
        """``tile 128x256x64, fp16, num_warps 4, num_stages auto (...): Triton 3.6.0's matmul``."""
        t = kernels[0]
        tile = f"tile {t.m}x{t.n}x{t.k}, " if len(kernels) == 1 else ""
        count = "num_stages auto (the most that load)" if stages is None else f"num_stages {stages}"
        # B's layout changes the bytes of 8-bit operands (the pipeliner's path into wgmma): say which one
        # was counted there, or wherever it was given.
        shown_layout = t.b_layout is not None or t.config(1).bits == 8
        layout = f"B {t.b_major.upper()}-major{'' if t.b_layout else ' (assumed)'}, " if shown_layout else ""
        loads = ", tensor descriptors (TMA)" if t.loads == "descriptor" else ""
        return f"{tile}{t.dtype}, {layout}num_warps {t.warps}{loads}, {count}: Triton {self.version}'s matmul"

    def json_fields(self, kernels: Sequence[TritonKernel], stages: int | None) -> dict[str, Any]:
        """The operand type, num_warps and the Triton version."""
        return {"dtype": kernels[0].dtype, "warps": kernels[0].warps, "triton_version": self.version,
                "b_layout": kernels[0].b_major, "loads": kernels[0].loads}

    def json_properties(self) -> dict[str, Any]:
        """The schema of json_fields."""
        return {"dtype": {"type": "string"}, "warps": {"type": "integer"}, "triton_version": {"type": "string"},
                "b_layout": {"enum": list(B_LAYOUTS)}, "loads": {"enum": list(LOADS)}}

    def parse_message(self, text: str) -> Explained | None:
        """"out of resource: shared memory, Required: X, Hardware limit: Y", checked: Y >= 1 and X > Y."""
        match = MESSAGE.search(text)
        if not match:
            return None
        required = check_bound(parse_count(match.group(1), "--explain's Required"), "--explain's Required")
        limit = check_bound(parse_count(match.group(2), "--explain's Hardware limit"), "--explain's Hardware limit")
        if limit < DEFAULT_SMEM_PER_BLOCK_BYTES:
            # Triton's limit is the device's opt-in attribute, never below the 48 KB every GPU gives a block.
            raise UsageError(f"--explain's Hardware limit must be >= {DEFAULT_SMEM_PER_BLOCK_BYTES} B: no GPU allows "
                             f"a block {limit} B of shared memory")
        if required <= limit:
            raise UsageError(f"--explain's Required ({required} B) must be more than the Hardware limit ({limit} B): "
                             "Triton raises OutOfResources only when the kernel needs more than the GPU allows")
        matches = tuple(p.key for p in PROFILES if p.max_smem_per_block_optin_bytes == limit)
        return Explained(self.name, required, limit, matches)

    def explain_notes(self, kernels: Sequence[TritonKernel], explained: Explained,
                      results: Sequence[FitResult]) -> tuple[str, ...]:
        """For Triton's own message: which num_stages of each tile need exactly Required, per target."""
        if explained.kind != self.name:
            return ()
        need, lines = explained.required_bytes, []
        by_target = {r.target_short or r.target: r for r in results}
        for k in kernels:
            what = f"{k.m}x{k.n}x{k.k} {k.dtype} (num_warps {k.warps})"
            hits = [f"num_stages {', '.join(map(str, s))} on {name}" for name, r in by_target.items()
                    if (s := _arithmetic().stages_giving(k, _cc(r), need))]
            lines.append(f"Required: {need} B is {what} with {'; '.join(hits)}." if hits else
                         f"Required: {need} B is no num_stages of {what} here: another tile, type or num_warps.")
        return tuple(lines)


    def recognize(self, kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
        """A kernel of Triton's cache by its name: its num_warps, num_stages and metadata.shared (cache.py)."""
        return cache.recognize(kernel, requested_bytes, target)


def _arithmetic() -> ModuleType:
    """Triton's arithmetic (rule.py, and the matmul's layouts, pipeliner and allocator under it)."""
    # Deferred: fit's options, a CUTLASS question and a trace's names are answered without it (start-up).
    from bisect_smem.analysis.fit.triton import rule

    return rule


def _cc(result: FitResult) -> tuple[int, int] | None:
    return None if result.compute_capability is None else parse_cc(result.compute_capability)
