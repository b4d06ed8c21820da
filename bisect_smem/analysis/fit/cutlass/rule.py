"""CUTLASS's GEMM behind fit's rule interface: its options (operand, C and D types, schedule, grouped,
the epilogue's storage), the kernels they make, the builders' stage rule and bytes (evaluate.py), its
JSON fields, and its kernels known by their names in a trace (names.py)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, CUTLASS_VERSIONS, LIBRARY, builders_of, launchers, names
from bisect_smem.analysis.fit.cutlass.evaluate import LABELS, evaluate_cutlass
from bisect_smem.analysis.fit.cutlass.gemm import EPILOGUE_SCHEDULES, SCHEDULES, GemmKernel
from bisect_smem.analysis.fit.cutlass.types import operand, output_bits
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Target, check_bound
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import gemm_family
from bisect_smem.core.sizes import parse_size

# (option, its argparse dest): the options only a CUTLASS kernel takes.
OPTIONS = (("--dtype-a", "dtype_a"), ("--dtype-b", "dtype_b"), ("--c-dtype", "c_dtype"), ("--d-dtype", "d_dtype"),
           ("--schedule", "schedule"), ("--grouped", "grouped"), ("--epilogue", "epilogue"),
           ("--launcher", "launcher"), ("--fusion", "fusion"), ("--swap-ab", "swap_ab"),
           ("--epilogue-schedule", "epilogue_schedule"),
           ("--cutlass-version", "cutlass_version"), ("--cluster", "cluster"))
# What a launcher fixes itself: given beside --launcher, these are a usage error.
LAUNCHER_FIXES = ("--c-dtype", "--schedule", "--grouped", "--epilogue")
_STRING = {"type": "string"}
_CLUSTER = re.compile(r"^\s*([0-9]{1,2})\s*x\s*([0-9]{1,2})\s*x\s*([0-9]{1,2})\s*$", re.IGNORECASE | re.ASCII)


def parse_cluster(text: str | None) -> tuple[int, int, int]:
    """``2x1x1`` -> (2, 1, 1); None -> (1, 1, 1); anything else is a UsageError naming the text."""
    if text is None:
        return (1, 1, 1)
    match = _CLUSTER.match(text)
    if not match:
        raise UsageError(f"--cluster must look like 2x1x1 (MxNxK CTAs; got {text[:40]!r})")
    m, n, k = (int(g) for g in match.groups())
    return m, n, k


class CutlassRule:
    """CUTLASS's collective builders (sm_90, sm_100, sm_120) as CUTLASS_VERSION computes them."""

    name = "cutlass"
    library = LIBRARY
    version = CUTLASS_VERSION
    labels = LABELS

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """--dtype-a, --dtype-b, --c-dtype, --d-dtype, --schedule, --grouped, --epilogue."""
        parser.add_argument("--dtype-a", metavar="DTYPE", help="A's type (overrides --dtype)")
        parser.add_argument("--dtype-b", metavar="DTYPE", help="B's type (overrides --dtype)")
        parser.add_argument("--c-dtype", metavar="DTYPE",
                            help="the epilogue's C: bf16 (default), fp16, fp32, void (no C)")
        parser.add_argument("--d-dtype", metavar="DTYPE", help="the epilogue's D: bf16 (default), fp16, fp32")
        parser.add_argument("--schedule", choices=SCHEDULES, help="auto (default: KernelScheduleAuto, "
                            "EpilogueScheduleAuto), cooperative, pingpong (sm_90, sm_120), 1sm, 2sm (sm_100)")
        parser.add_argument("--grouped", action="store_true", help="the grouped (ptr-array) kernel")
        parser.add_argument("--epilogue", metavar="BYTES", help="the epilogue's shared storage, instead of the "
                                                                "default epilogue's from --c-dtype and --d-dtype")
        parser.add_argument("--launcher", choices=launchers.LAUNCHERS,
                            help="the kernel as a library's launcher builds it: trtllm-moe, TensorRT-LLM's and "
                                 "FlashInfer's MoE grouped GEMM (moe_gemm_tma_ws_launcher; sm_120 nvfp4, and "
                                 "--dtype-a mxfp8 --dtype-b mxfp4 for MXFP8 activations with MXFP4 weights; sm_90 "
                                 "bf16, fp16, fp32, e4m3; sm_100 all of these and mxfp8, --tile the generator's CTA "
                                 "tile, --cluster 2x1x1 the 2-SM kernel; --dtype defaults to nvfp4, --d-dtype is the "
                                 "output type); without --tile, every kernel FlashInfer generates for the architecture")
        parser.add_argument("--fusion", choices=launchers.FUSIONS,
                            help="the launcher's epilogue fusion: none (default) or finalize (the FC2 epilogue: "
                                 "scatter, router scales, bias)")
        parser.add_argument("--swap-ab", action="store_true", help="the launcher's swap_ab kernel (D transposed)")
        parser.add_argument("--epilogue-schedule", choices=EPILOGUE_SCHEDULES,
                            help="the launcher's sm_100 epilogue: tma (default, PtrArrayTmaWarpSpecialized) or nosmem "
                                 "(PtrArrayNoSmemWarpSpecialized, no shared memory)")
        parser.add_argument("--cluster", metavar="MxNxK", help="the cluster shape (default 1x1x1); on sm_100, "
                            "--schedule auto takes the 2-SM kernel where the cluster is even along M, as CUTLASS does")
        parser.add_argument("--cutlass-version", metavar="X.Y.Z",
                            help=f"the CUTLASS release whose builders count the kernel: {CUTLASS_VERSIONS[0]} "
                                 f"through {CUTLASS_VERSIONS[-1]} (default {CUTLASS_VERSION}); a release is counted "
                                 "by the rules it has, and the answer names the release whose rules it used")

    def given(self, args: argparse.Namespace) -> list[str]:
        """CUTLASS's options that were given."""
        return [option for option, dest in OPTIONS if getattr(args, dest, None) not in (None, False)]

    def kernels(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                stages: int | None) -> tuple[GemmKernel, ...]:
        """One GemmKernel per tile; the operands default to fp16, C and D to bf16."""
        if dtype is not None:
            operand(dtype, "--dtype")
        launchers.check(args.launcher, args.fusion or "none", args.swap_ab, args.epilogue_schedule)
        if args.launcher is not None:
            return self._launched(args, tiles, dtype, stages)
        dtype = dtype or "fp16"
        epilogue = check_bound(parse_size(args.epilogue, "--epilogue"), "--epilogue") if args.epilogue else None
        return tuple(GemmKernel(t.m, t.n, t.k, args.dtype_a or dtype, args.dtype_b or dtype, args.c_dtype or "bf16",
                                args.d_dtype or "bf16", args.schedule or "auto", args.grouped, stages, epilogue,
                                cutlass_version=args.cutlass_version or CUTLASS_VERSION,
                                cluster=parse_cluster(args.cluster)) for t in tiles)

    def _launched(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                  stages: int | None) -> tuple[GemmKernel, ...]:
        """The launcher's kernels: grouped, its schedule, C typed as D (the output type: --d-dtype, else the
        activations' type, bf16 for fp8 and fp4), A the activations and B the weights (before swap_ab)."""
        fixed = [option for option, dest in OPTIONS if option in LAUNCHER_FIXES and getattr(args, dest)]
        if fixed:
            raise UsageError(f"{', '.join(fixed)}: --launcher {args.launcher} fixes {'it' if len(fixed) == 1 else 'them'}"
                             f" itself: drop {'it' if len(fixed) == 1 else 'them'}")
        dtype = dtype or launchers.OPERANDS["sm120"][0][0]
        act, weight = args.dtype_a or dtype, args.dtype_b or dtype
        out = args.d_dtype or launchers.default_output(act)
        return tuple(GemmKernel(t.m, t.n, t.k, act, weight, out, out, "auto", True, stages, None, args.launcher,
                                args.fusion or "none", args.swap_ab, args.cutlass_version or CUTLASS_VERSION,
                                parse_cluster(args.cluster), args.epilogue_schedule or "tma") for t in tiles)

    def listing(self, args: argparse.Namespace, dtype: str | None, stages: int | None) -> launchers.Listing | None:
        """Without --tile, --launcher lists every kernel its generator emits, narrowed by --dtype (or --dtype-a
        and --dtype-b), --d-dtype, --fusion, --swap-ab, --cluster and --epilogue-schedule; None without --launcher."""
        if args.launcher is None:
            return None
        launchers.check(args.launcher, args.fusion or "none", args.swap_ab, args.epilogue_schedule)
        fixed = [option for option, dest in OPTIONS if option in LAUNCHER_FIXES and getattr(args, dest)]
        if fixed:
            raise UsageError(f"{', '.join(fixed)}: --launcher {args.launcher} fixes {'it' if len(fixed) == 1 else 'them'}"
                             f" itself: drop {'it' if len(fixed) == 1 else 'them'}")
        for name, option in ((dtype, "--dtype"), (args.dtype_a, "--dtype-a"), (args.dtype_b, "--dtype-b")):
            if name is not None:
                operand(name, option)
        act, weight = args.dtype_a or dtype, args.dtype_b or dtype
        out = args.d_dtype
        if out is not None:
            output_bits(out, "--d-dtype")
        return launchers.Listing(args.launcher, args.cutlass_version or CUTLASS_VERSION,
                                 operand(act).name if act else None, operand(weight).name if weight else None, out,
                                 args.fusion, True if args.swap_ab else None,
                                 parse_cluster(args.cluster) if args.cluster else None, stages, args.epilogue_schedule)

    def describe_listing(self, listing: launchers.Listing) -> str:
        """``trtllm-moe, every kernel FlashInfer generates; stages auto: CUTLASS 4.7.0's builders``."""
        given = [f"{name} {value}" for name, value in (("output", listing.out), ("fusion", listing.fusion),
                                                      ("swap_ab", "on" if listing.swap_ab else None),
                                                      ("cluster", listing.cluster and "x".join(map(str, listing.cluster))),
                                                      ("epilogue", listing.epilogue))
                 if value]
        count = "stages auto" if listing.stages is None else f"{listing.stages} stages"
        return (f"{listing.launcher}, every kernel FlashInfer generates{', ' + ', '.join(given) if given else ''}"
                f"; {count}: CUTLASS {listing.cutlass_version}'s builders")

    def candidates(self, listing: launchers.Listing, target: Target) -> tuple[tuple[GemmKernel, ...], str | None]:
        """The listed kernels on the target's architecture, and where there are none, why."""
        family = gemm_family(target.compute_capability)
        if family and (reason := launchers.not_modelled(family, target.compute_capability)):
            return (), reason
        found = listing.kernels(family) if family else ()
        return found, None if found else listing.why_none(family)

    def candidate_fields(self, kernel: GemmKernel) -> tuple[tuple[str, str], ...]:
        """What tells one listed kernel from another: types, tile, cluster, fusion, swap_ab, epilogue."""
        types = kernel.a if kernel.a == kernel.b else f"{kernel.a} x {kernel.b}"
        return (("tile", f"{kernel.m}x{kernel.n}x{kernel.k}"), ("fusion", kernel.fusion),
                ("swap_ab", "on" if kernel.swap_ab else "off"), ("cluster", "x".join(map(str, kernel.cluster))),
                ("epilogue", kernel.epilogue_schedule), ("types", types), ("out", kernel.d))

    def evaluate(self, kernel: GemmKernel, request: FitRequest, target: Target) -> FitResult:
        """The build CUTLASS makes for the target's family, against its limits."""
        return evaluate_cutlass(kernel, request.static_bytes, request.threads, target)

    def describe(self, kernels: Sequence[GemmKernel], stages: int | None) -> str:
        """``tile 128x256x128, nvfp4, C bf16, D bf16, schedule auto, stages auto (...): CUTLASS 4.7.0's builders``."""
        k = kernels[0]
        tile = f"tile {k.m}x{k.n}x{k.k}, " if len(kernels) == 1 else ""
        types = k.a if k.a == k.b else (f"activations {k.a}, weights {k.b}" if k.launcher else f"A {k.a}, B {k.b}")
        count = "stages auto (StageCountAutoCarveout)" if stages is None else f"{stages} stages (StageCount)"
        epilogue = f"epilogue {k.epilogue_bytes} B (given)" if k.epilogue_bytes is not None else f"C {k.c}, D {k.d}"
        if k.cluster != (1, 1, 1):
            types += f", cluster {'x'.join(map(str, k.cluster))}"
        if k.launcher is not None and k.cluster[0] == 2:
            # The launcher's Is2SM: on sm_100 the tile given is each CTA's, the MMA tile spans the pair.
            types += f" (on sm_100 the 2-SM kernel, MMA tile {2 * k.m}x{k.n}x{k.k})"
        if k.launcher is not None:
            shown = f", {k.epilogue_schedule} epilogue" if k.epilogue_schedule != "tma" else ""
            return (f"{tile}{types}, output {k.d}, fusion {k.fusion}{', swap_ab' if k.swap_ab else ''}{shown}, {count}: "
                    f"{k.launcher} launcher (moe_gemm_tma_ws_launcher) with {builders_of(k.cutlass_version)}")
        return (f"{tile}{types}, {epilogue}, schedule {k.schedule}{', grouped' if k.grouped else ''}, {count}: "
                f"{builders_of(k.cutlass_version)}")

    def json_fields(self, kernels: Sequence[GemmKernel], stages: int | None) -> dict[str, Any]:
        """The types, schedule, grouped, the given epilogue bytes and the CUTLASS version."""
        k = kernels[0]
        return {"dtype_a": k.a, "dtype_b": k.b, "c_dtype": k.c, "d_dtype": k.d, "schedule": k.schedule,
                "grouped": k.grouped, "cutlass_version": k.cutlass_version, "epilogue_bytes": k.epilogue_bytes,
                "launcher": k.launcher, "fusion": k.fusion, "swap_ab": k.swap_ab, "cluster": list(k.cluster),
                "epilogue_schedule": k.epilogue_schedule}

    def json_properties(self) -> dict[str, Any]:
        """The schema of json_fields."""
        return {"dtype_a": _STRING, "dtype_b": _STRING, "c_dtype": _STRING, "d_dtype": _STRING, "schedule": _STRING,
                "grouped": {"type": "boolean"}, "cutlass_version": _STRING,
                "epilogue_bytes": {"type": ["integer", "null"]}, "launcher": {"enum": [*launchers.LAUNCHERS, None]},
                "fusion": {"enum": list(launchers.FUSIONS)}, "swap_ab": {"type": "boolean"},
                "cluster": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3},
                "epilogue_schedule": {"enum": list(EPILOGUE_SCHEDULES)}}

    def parse_message(self, text: str) -> Explained | None:
        """CUTLASS has no message of its own ('Error Internal' says no number): None."""
        return None

    def explain_notes(self, kernels: Sequence[GemmKernel], explained: Explained,
                      results: Sequence[FitResult]) -> tuple[str, ...]:
        """Nothing beyond the table of stage counts."""
        return ()

    def recognize(self, kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
        """A collective whose demangled name shows its stage count, tile and type (names.py)."""
        return names.recognize(kernel, requested_bytes, target)
