"""The ``fit`` subcommand: gather the kernel's sizes and the targets, evaluate, print. Called by cli.py only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bisect_smem.analysis.fit import FitRequest, FitResult, Target, evaluate, tile_smem_bytes
from bisect_smem.app import output
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import to_jsonable
from bisect_smem.core.profiles import PROFILES, find_profile, profile_names
from bisect_smem.core.sizes import parse_size

FIT_SCHEMA = "bisect_smem/fit/v1"
EXIT_FITS, EXIT_DOES_NOT_FIT = 0, 1


def build_request(args: argparse.Namespace) -> tuple[FitRequest, str]:
    """The kernel's sizes from the arguments, and a line saying where they came from."""
    sources = [name for name, value in (("BYTES", args.bytes), ("--dynamic", args.dynamic), ("--tile", args.tile))
               if value is not None]
    if len(sources) > 1:
        raise UsageError(f"give the dynamic size once (got {' and '.join(sources)})")
    if args.cubin and args.ptx:
        raise UsageError("give --cubin or --ptx, not both")
    compiled = args.cubin or args.ptx
    if compiled and not args.kernel:
        raise UsageError(f"--{'cubin' if args.cubin else 'ptx'} needs --kernel NAME")
    if compiled and args.static is not None:
        raise UsageError("the static size comes from the compiled file: drop --static")
    if not sources and not compiled:
        raise UsageError("fit needs a size: BYTES, --tile, or --cubin/--ptx with --kernel")
    notes = []
    if args.tile:
        dynamic = tile_smem_bytes(args.tile, args.stages, args.dtype)
        notes.append(f"tile {args.tile}, {args.stages} stage(s), {args.dtype}: "
                     f"{args.stages} * (M*K + N*K) * {args.dtype} bytes")
    else:
        text = args.bytes if args.bytes is not None else args.dynamic
        dynamic = parse_size(text, "dynamic size") if text is not None else 0
    static = parse_size(args.static, "static size") if args.static is not None else 0
    if compiled:
        name, static, how = read_static(Path(compiled), args.kernel, ptx=bool(args.ptx))
        notes.append(f"static {static} B of {name}, {how}")
    return FitRequest(dynamic, static, args.threads), "; ".join(notes)


def read_static(path: Path, kernel: str, ptx: bool) -> tuple[str, int, str]:
    """The kernel's static shared memory: from the driver where a GPU can load the file, else from the file."""
    from bisect_smem.analysis.cubin import cubin_static_smem, ptx_static_smem

    name, static = (ptx_static_smem if ptx else cubin_static_smem)(path, kernel)
    try:
        from bisect_smem.devices.backends.cupy_backend import CupyBackend, loaded_static_smem

        if CupyBackend().is_available():
            loaded = loaded_static_smem(path, name)
            if loaded != static:
                return name, loaded, f"read by the driver (the file says {static} B)"
            return name, loaded, "read by the driver (the file agrees)"
    except BackendUnavailable:
        pass
    return name, static, f"read from the {'PTX' if ptx else 'cubin ELF sections'}"


def targets(args: argparse.Namespace) -> tuple[list[Target], str | None]:
    """Published architectures (all, or --arch), then local devices measured now."""
    profiles = PROFILES
    if args.arch:
        profiles = []
        for name in args.arch:
            p = find_profile(name)
            if p is None:
                raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
            profiles.append(p)
    found = [Target.from_profile(p) for p in profiles]
    local, note = local_devices(args)
    return found + [Target.from_report(d) for d in local], note


def local_devices(args: argparse.Namespace) -> tuple[list[Any], str | None]:
    from bisect_smem.app.requests import build_request
    from bisect_smem.app.runner import run
    from bisect_smem.experiments.measure import MeasureConfig

    if args.no_local and not args.simulate:
        return [], None
    config = MeasureConfig(static_sizes=(0,), threads=(128,), residency=False, carveout=False)
    request = build_request(None, args.simulate, config=config)
    try:
        devices = run(request)
    except BackendUnavailable as exc:
        return [], f"no local GPU measured: {exc}"
    # A device whose ceilings could not be measured is shown as unknown rather than dropped.
    return list(devices), None


def run_fit(args: argparse.Namespace) -> int:
    request, source = build_request(args)
    json_path = output.output_path(args.json, "the result")
    found, note = targets(args)
    results = [evaluate(request, t) for t in found]
    data = {"schema": FIT_SCHEMA, "request": {**to_jsonable(request), "total_bytes": request.total_bytes},
            "source": source, "results": [to_jsonable(r) for r in results], "note": note}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        print(render(request, source, results, note))
    if json_path is not None:
        output.write_atomic(json_path, text)
    return EXIT_FITS if all(r.fits for r in results) else EXIT_DOES_NOT_FIT


def render(request: FitRequest, source: str, results: list[FitResult], note: str | None) -> str:
    head = (f"kernel: {request.dynamic_bytes} B dynamic + {request.static_bytes} B static = {request.total_bytes} B "
            f"per block, {request.threads} threads" + (f" ({source})" if source else ""))
    rows = []
    for r in results:
        if r.over_bytes is None:
            margin = "-"
        elif r.over_bytes > 0:
            margin = f"over by {r.over_bytes}"
        else:
            margin = f"{-r.over_bytes} to spare"
        rows.append((r.target, r.kind, r.verdict, "-" if r.optin_limit_bytes is None else r.optin_limit_bytes, margin,
                     "-" if r.blocks_per_sm is None else r.blocks_per_sm))
    table = tabulate(rows, headers=("target", "limits", "verdict", "opt-in limit B", "margin B", "blocks/SM"),
                     disable_numparse=True)
    return "\n".join([head, table, *([note] if note else [])])
