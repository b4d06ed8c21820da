"""The public face of bisect_smem, for programs (an autotuner dropping the tiles and configs that will not
fit before it compiles them): a device's limits (measured now, read from a saved report or baseline, or the
published row of an architecture) and whether a kernel fits them (a byte count, a cubin or PTX kernel, a
CUTLASS tile, a launcher's kernels, a Triton config), and a recorded trace explained.

Every function returns the frozen values the command line renders (Fit, FitResult, Target, ArchProfile, the
trace's explanation) and raises only the project's exceptions: UsageError (exit 2) for a value it cannot
take, with the value named; BaselineError (exit 2) for a saved report or baseline that cannot be read;
BackendUnavailable (exit 3) where no GPU or backend can measure; MeasurementError (exit 4) where a
measurement could not be completed. ``import bisect_smem`` loads this module on first use; it prints
nothing and writes no file.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bisect_smem.analysis.fit.answer import Fit, fit_kernels, fit_listed, fit_size
from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.rules import DEFAULT_RULE, RULES
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Target
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.app.run import fit_targets
from bisect_smem.core.errors import BackendUnavailable, BaselineError, BisectSmemError, MeasurementError, UsageError
from bisect_smem.core.profiles import PROFILES, ArchProfile

if TYPE_CHECKING:  # deferred for type checkers only: at run time the trace's reader loads on first use
    from bisect_smem.analysis.trace import Explained as TraceExplanation

__all__ = [
    "ArchProfile", "BackendUnavailable", "BaselineError", "BisectSmemError", "Fit", "FitResult",
    "MeasurementError", "Target", "TraceExplanation", "UsageError", "explain_trace", "fit_bytes", "fit_cubin",
    "fit_launcher", "fit_tile", "fit_triton", "measure_limits", "profile", "profiles", "published_limits",
    "read_limits",
]

DEFAULT_THREADS = 128  # a launch's block size where none is given (a library's kernel sets its own)
# The limits to fit against: a Target, an architecture's published row (by name, "sm_90", "9.0", "h100", or the
# ArchProfile), several of those, or None for every published architecture.
Targets = Target | ArchProfile | str | Iterable[Target | ArchProfile | str] | None
TileLike = str | tuple[int, int, int]  # "128x256x64" or (128, 256, 64): M x N x K elements


def profiles() -> tuple[ArchProfile, ...]:
    """Every row of the published table, oldest architecture first (``bisect-smem profiles``)."""
    return PROFILES


def profile(arch: str) -> ArchProfile:
    """The published row of an architecture named ``sm_90``, ``9.0``, ``h100`` or ``hopper``; UsageError,
    listing the valid names, for a name that is none."""
    if not isinstance(arch, str):
        raise UsageError(f"an architecture is named by a string such as 'sm_90' (got {arch!r})")
    return fit_targets.published([arch], True)[0]


def published_limits(arch: str | ArchProfile) -> Target:
    """The limits an architecture's published row gives a block (the opt-in limit, the SM's shared memory,
    its reserve and granularity, bytes), to fit against."""
    return Target.from_profile(arch if isinstance(arch, ArchProfile) else profile(arch))


def read_limits(path: str | os.PathLike[str]) -> list[Target]:
    """The limits measured on a fleet: every device of a saved report (``bisect-smem --json``), a baseline
    file, or every baseline of a folder laid out ``DIR/<gpu-model>/<driver>.json``. UsageError for a file
    that is none of them."""
    return fit_targets.file_targets(os.fspath(path), "limits")


def measure_limits(*, simulate: Sequence[str] = ()) -> list[Target]:
    """The limits of every local GPU, measured now (a quick measurement: the ceilings of a block without
    static data), or of the simulated devices ``simulate`` names ("h200", "a100,optin=160K"). A device whose
    ceilings could not be measured is a Target with ``error`` set and no opt-in limit. BackendUnavailable
    where no GPU or backend can be used."""
    if isinstance(simulate, str):
        simulate = (simulate,)
    return fit_targets.measure_targets(tuple(simulate))  # the one place the API measures


def fit_bytes(dynamic_bytes: int, *, static_bytes: int = 0, threads: int = DEFAULT_THREADS,
              targets: Targets = None) -> Fit:
    """Whether a block of ``dynamic_bytes`` of dynamic and ``static_bytes`` of static shared memory, of
    ``threads`` threads, fits each target: without opt-in, with opt-in, or not (by how many bytes), and how
    many such blocks share an SM."""
    request = FitRequest(_whole(dynamic_bytes, "dynamic_bytes"), _whole(static_bytes, "static_bytes"),
                         _whole(threads, "threads"))
    return fit_size(request, _targets(targets))


def fit_cubin(path: str | os.PathLike[str], kernel: str | None = None, *, ptx: bool = False, dynamic_bytes: int = 0,
              threads: int = DEFAULT_THREADS, targets: Targets = None, ask_driver: bool = False) -> Fit:
    """``fit_bytes`` of a compiled kernel, its static shared memory read from its cubin (or, with ``ptx``, its
    PTX): ``kernel`` is a unique part of its name (not needed where the file has one kernel). ``ask_driver``:
    where a local GPU loads the file, the driver's number is taken over the file's."""
    name, static, how = fit_targets.compiled_static(Path(path), kernel, ptx, ask_driver)
    request = FitRequest(_whole(dynamic_bytes, "dynamic_bytes"), static, _whole(threads, "threads"))
    return fit_size(request, _targets(targets), f"static {static} B of {name}, {how}")


def fit_tile(tile: TileLike | Sequence[TileLike], *, library: str = DEFAULT_RULE, dtype: str | None = None,
             stages: int | None = None, options: Mapping[str, object] | None = None, static_bytes: int = 0,
             targets: Targets = None) -> Fit:
    """A library's GEMM kernel of each tile (M x N x K) on each target, counted by that library's own rule
    (``library``: "cutlass" or "triton"): the stage count it picks (``stages`` None: the library's automatic
    count; else that many), its shared memory, every part of it, and the margin. ``dtype`` is the operands'
    type (bf16, fp16, e4m3, nvfp4, ...); ``options`` are the library's own options by their command-line names
    without dashes ("schedule", "c_dtype", "cluster", "cutlass_version" for CUTLASS; "warps", "b_layout",
    "loads" for Triton), values as on the command line."""
    rule = _rule(library)
    tiles = list(dict.fromkeys(_tile(t) for t in _tile_list(tile)))
    stages = _stages(stages)
    kernels = rule.kernels(_options(rule, options), tiles, dtype, stages)
    return fit_kernels(rule, kernels, stages, FitRequest(0, _whole(static_bytes, "static_bytes"), DEFAULT_THREADS),
                       _targets(targets))


def fit_triton(block_m: int, block_n: int, block_k: int, *, num_stages: int | None = None, num_warps: int = 4,
               dtype: str = "fp16", b_layout: str | None = None, loads: str | None = None,
               targets: Targets = None) -> Fit:
    """A Triton matmul config (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) on each target, as Triton
    compiles it: ``metadata.shared`` against the limit. ``num_stages`` None: the most that Triton loads."""
    return fit_tile((block_m, block_n, block_k), library="triton", dtype=dtype, stages=num_stages,
                    options={"warps": num_warps, "b_layout": b_layout, "loads": loads}, targets=targets)


def fit_launcher(launcher: str = "trtllm-moe", *, library: str = DEFAULT_RULE, dtype: str | None = None,
                 stages: int | None = None, options: Mapping[str, object] | None = None, static_bytes: int = 0,
                 threads: int = DEFAULT_THREADS, targets: Targets = None) -> Fit:
    """Every kernel a library's launcher builds (``trtllm-moe``: TensorRT-LLM's and FlashInfer's MoE grouped
    GEMM) for each target's architecture, each result's ``listed_as`` telling it from the others; ``dtype`` and
    ``options`` ("dtype_a", "dtype_b", "d_dtype", "fusion", "swap_ab", "cluster") narrow the list."""
    rule = _rule(library)
    stages = _stages(stages)
    listing = rule.listing(_options(rule, {**(options or {}), "launcher": launcher}), dtype, stages)
    if listing is None:
        raise UsageError(f"{rule.library} lists no launcher's kernels for {launcher!r}")
    request = FitRequest(0, _whole(static_bytes, "static_bytes"), _whole(threads, "threads"))
    return fit_listed(rule, listing, request, _targets(targets))


def explain_trace(folder: str | os.PathLike[str], targets: Targets = None, *, here: Target | None = None,
                  recorded: bool = True) -> TraceExplanation:
    """Each shared-memory request of the trace in ``folder`` (``bisect-smem trace --out DIR``) against the
    limits of the GPU it ran on (``here``; None: those recorded with the trace, unless ``recorded`` is False)
    and the other ``targets`` (which would not fit there). Lines and files that could not be read are
    counted in its ``skipped``."""
    # Deferred: the trace's reader and explanation load only where a trace is explained, not for a fit.
    from bisect_smem.app.run import trace_explain

    path = Path(folder)
    if here is None and recorded:
        here = trace_explain.recorded_limits(path)[0]
    return trace_explain.explain_folder(path, here, _targets(targets))


def __getattr__(name: str) -> Any:
    """TraceExplanation, the trace's explanation (analysis.trace.Explained), loaded on first use (PEP 562)."""
    if name != "TraceExplanation":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Deferred, as in explain_trace: only a caller that names the type loads the trace's modules.
    from bisect_smem.analysis.trace import Explained

    return Explained


def _targets(targets: Targets) -> list[Target]:
    """The limits ``targets`` names, in order; every published architecture for None."""
    if targets is None:
        return [Target.from_profile(p) for p in PROFILES]
    if isinstance(targets, Target | ArchProfile | str):
        targets = [targets]
    return [t if isinstance(t, Target) else published_limits(t) for t in targets]


def _whole(value: object, name: str) -> int:
    """``value`` where it is a whole number (not a bool); else a UsageError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number (got {value!r})")
    return value


def _stages(stages: int | None) -> int | None:
    if stages is not None and _whole(stages, "stages") < 1:
        raise UsageError(f"stages must be >= 1, or None for the library's automatic count (got {stages})")
    return stages


def _rule(library: str) -> GemmRule:
    if library not in RULES:
        raise UsageError(f"unknown library {library!r}; valid: {', '.join(RULES)}")
    return RULES[library]


def _tile_list(tile: TileLike | Sequence[TileLike]) -> list[TileLike]:
    """One tile (a string, or three whole numbers) or several."""
    if isinstance(tile, str) or (isinstance(tile, tuple) and len(tile) == 3 and all(isinstance(v, int) for v in tile)):
        return [tile]  # type: ignore[list-item]
    return list(tile)  # type: ignore[arg-type]


def _tile(tile: TileLike) -> Tile:
    if isinstance(tile, str):
        return Tile.parse(tile)
    if not isinstance(tile, tuple) or len(tile) != 3:
        raise UsageError(f"a tile is 'MxNxK' or (M, N, K) (got {tile!r})")
    m, n, k = (_whole(v, "a tile dimension") for v in tile)
    return Tile(m, n, k)


def _options(rule: GemmRule, options: Mapping[str, object] | None) -> argparse.Namespace:
    """``options`` as the rule reads them: its command-line options' values (every one not given at its
    default); a name the rule has no option for, a flag that is not a bool, or a value outside an option's
    choices is a UsageError naming it."""
    parser = argparse.ArgumentParser(add_help=False)
    rule.add_options(parser)
    actions = {a.dest: a for a in parser._actions}
    unknown = sorted(set(options or {}) - set(actions))
    if unknown:
        raise UsageError(f"{rule.library} has no option {', '.join(map(repr, unknown))}; valid: "
                         f"{', '.join(sorted(actions))}")
    given: dict[str, object] = {}
    for name, value in (options or {}).items():
        action = actions[name]
        if value is None:
            continue
        if action.nargs == 0:  # a flag
            if not isinstance(value, bool):
                raise UsageError(f"{name} is on or off: True or False (got {value!r})")
        elif isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # as the command line gives it, for the rule's own check
        elif not isinstance(value, str):
            raise UsageError(f"{name} takes a string or a whole number (got {value!r})")
        if action.type is not None and isinstance(value, str):  # as argparse converts the option's text
            try:
                value = action.type(value)
            except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
                raise UsageError(f"{name}: {exc} (got {value!r})") from None
        if action.choices is not None and value not in action.choices:
            raise UsageError(f"{name} must be one of {', '.join(map(str, action.choices))} (got {value!r})")
        given[name] = value
    return argparse.Namespace(**{**{d: a.default for d, a in actions.items()}, **given})
