"""Record what a real Triton allocates: the shared memory (``kernel.metadata.shared``) of Triton's
matmul over a spread of BLOCK_M/N/K, num_stages, num_warps and operand types, and the
``OutOfResources`` text where a config does not fit the GPU it is loaded on.

On a GPU (the default) every config is compiled through the JIT, as a Triton user compiles it
(``mm.warmup`` with real tensors, so the arguments are specialised the same way), then loaded, which
is where Triton compares ``metadata.shared`` with the device's opt-in limit and raises
OutOfResources. ``--arch 90`` compiles for that architecture without a GPU (no load, no message).

    python tools/triton_truth/collect.py --out tests/data/triton_matmul_sm90.json
    for cc in 80 90 100 120; do    # no GPU needed: every num_warps, int8 and tf32 on every target
        python tools/triton_truth/collect.py --arch $cc --points --out tests/data/triton_matmul_sm${cc}_points.json
        python tools/triton_truth/collect.py --arch $cc --descriptor --out tests/data/triton_matmul_sm${cc}_desc.json
    done

Never run by ``make test``; its output is committed test data.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Triton's tutorial matmul (03-matrix-multiplication), without the grouped ordering."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    # int8 products accumulate in int32 (tl.dot's rule for integer operands), the others in fp32.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def mm_desc(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The same matmul through tensor descriptors (TMA on sm_90 on): A, B and C are loaded and stored by
    block, C through shared memory."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if a_desc.dtype == tl.int8 else tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


# Each operand type's torch type and Triton pointer type. tf32 is fp32 operands through tl.dot's default
# input precision on NVIDIA ("tf32"), the same compile as fp32; int8 accumulates and stores int32.
DTYPES = {"fp16": ("float16", "*fp16"), "bf16": ("bfloat16", "*bf16"), "fp32": ("float32", "*fp32"),
          "fp8e4m3": ("float8_e4m3fn", "*fp8e4nv"), "int8": ("int8", "*i8"), "tf32": ("float32", "*fp32")}
OUTPUT = {"fp8e4m3": "*fp16", "int8": "*i32"}  # C's pointer type where it is not the operands'
SPREAD = ("fp16", "bf16", "fp32", "fp8e4m3")  # the types of configs() and wide_configs()
WARPS = (1, 2, 4, 8, 16)  # every num_warps a CTA of at most 512 threads takes
SIZE = 512  # the problem the JIT specialises on: every dimension and stride a multiple of 16


def configs(quick: bool, dtypes: tuple[str, ...] = SPREAD, both_warps: bool = False) -> list[dict]:
    """The spread: block shapes from 16 to 256, 1 to 6 stages, 4 and 8 warps (both with ``both_warps``),
    the operand types asked for (all four by default)."""
    blocks = [(16, 16, 16), (32, 32, 32), (64, 64, 32), (64, 64, 64), (128, 64, 32), (64, 128, 64),
              (128, 128, 32), (128, 128, 64), (128, 256, 64), (256, 128, 64), (128, 128, 128), (256, 256, 64),
              (64, 256, 32), (256, 64, 128), (128, 256, 128)]
    out = []
    for (bm, bn, bk), stages, dtype in itertools.product(blocks, (1, 2, 3, 4, 5, 6), dtypes):
        if dtype == "fp32" and bk > 64:
            continue
        for warps in (4, 8) if both_warps else (8 if bm * bn >= 128 * 256 else 4,):
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps,
                        "dtype": dtype})
    return out[::7] if quick else out


def wide_configs() -> list[dict]:
    """Every BLOCK_M and BLOCK_N of 16..256 with BLOCK_K 16..128, 4 and 8 warps, 1 to 4 stages, fp16,
    fp32 and fp8 (bf16 on three shapes: it is laid out as fp16), up to 4 MiB of A x B work a tile."""
    dims = (16, 32, 64, 128, 256)
    out = []
    for bm, bn, bk, warps, stages, dtype in itertools.product(dims, dims, (16, 32, 64, 128), (4, 8), (1, 2, 3, 4),
                                                              ("fp16", "bf16", "fp32", "fp8e4m3")):
        if bm * bn * bk * (4 if dtype == "fp32" else 2) > 256 * 256 * 128:
            continue
        if dtype == "bf16" and (bm, bn) not in ((64, 64), (128, 128), (128, 256)):
            continue
        out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps,
                    "dtype": dtype})
    return out


def points_configs() -> list[dict]:
    """Every num_warps (1, 2, 4, 8, 16) and the types beyond configs(), 1 to 3 stages: fp16 at 1, 2 and 16
    warps (1 and 2 warps on the smaller tiles only: one warp's code for a 256-wide tile takes ptxas minutes),
    fp8 and fp32 at 2 and 16, int8 at every num_warps (and at K 16, which Triton refuses), and tf32."""
    small, middle, large = [(32, 32, 32), (64, 64, 32), (64, 64, 64)], [(128, 64, 32), (64, 128, 64), (128, 128, 64)], \
        [(128, 256, 64), (256, 128, 64)]
    int8 = [(64, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 128)]
    spread = [(small, (1,), (1, 2, 3), "fp16"), (small + middle, (2,), (1, 2, 3), "fp16"),
              (small + middle + large, (16,), (1, 2, 3), "fp16"),
              ([(64, 64, 64), (128, 128, 64)], (2, 16), (2, 3), "fp8e4m3"),
              ([(64, 64, 32), (128, 128, 32)], (2, 16), (2, 3), "fp32"),
              ([(64, 64, 16)], (4,), (2,), "int8"), (int8[:1], (1,), (1, 2, 3), "int8"),
              (int8[:2], (2,), (1, 2, 3), "int8"), (int8, (4, 8, 16), (1, 2, 3), "int8"),
              ([(64, 64, 32), (128, 128, 32)], (4, 8), (2, 3), "tf32")]
    return [{"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps, "dtype": dtype}
            for shapes, warp_counts, stage_counts, dtype in spread
            for (bm, bn, bk), warps, stages in itertools.product(shapes, warp_counts, stage_counts)]


def descriptor_configs() -> list[dict]:
    """The tensor-descriptor matmul (``"descriptor": true``): seven block shapes, 1 to 4 stages, 4 and 8
    warps, fp16, bf16, fp32, fp8 and int8 (2 and 16 warps on two shapes)."""
    blocks = [(64, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64), (128, 128, 128), (64, 128, 32),
              (128, 64, 32)]
    spread = [(blocks, (4, 8), (1, 2, 3, 4), "fp16"), (blocks[:3], (4,), (2, 3), "fp32"),
              (blocks[:3], (4, 8), (2, 3), "fp8e4m3"), (blocks[:3], (4,), (2, 3), "int8"),
              (blocks[:3], (4,), (1, 2, 3), "bf16"),
              (blocks[:2], (2, 16), (2, 3), "fp16")]
    return [{"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps, "dtype": dtype,
             "descriptor": True}
            for shapes, warp_counts, stage_counts, dtype in spread
            for (bm, bn, bk), warps, stages in itertools.product(shapes, warp_counts, stage_counts)]


def on_gpu(cfg: dict) -> dict:
    """Compile through the JIT with real tensors, then load (where OutOfResources is raised)."""
    import torch
    from triton.runtime.errors import OutOfResources

    torch_dtype = getattr(torch, DTYPES[cfg["dtype"]][0])
    a = torch.zeros((SIZE, SIZE), device="cuda", dtype=torch.float16).to(torch_dtype)
    b = torch.zeros((SIZE, SIZE), device="cuda", dtype=torch.float16).to(torch_dtype)
    if cfg.get("b_layout") == "k":  # B stored K-major (N x K in memory), as Triton's fp8 examples on Hopper keep it
        b = b.t()
    out = {"fp8e4m3": torch.float16, "int8": torch.int32}.get(cfg["dtype"], torch_dtype)
    c = torch.empty((SIZE, SIZE), device="cuda", dtype=out)
    record = dict(cfg)
    try:
        kernel = mm.warmup(a, b, c, SIZE, SIZE, SIZE, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                           c.stride(0), c.stride(1), BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                           BLOCK_K=cfg["BLOCK_K"], num_stages=cfg["num_stages"], num_warps=cfg["num_warps"],
                           grid=(1,))
    except Exception as exc:  # noqa: BLE001 - a config Triton cannot compile is recorded as such
        record.update(compiled=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                      error_message=_message(exc))
        return record
    record.update(compiled=True, shared=kernel.metadata.shared, metadata_num_stages=kernel.metadata.num_stages)
    try:
        kernel._init_handles()
        record.update(loads=True, out_of_resources=None)
    except OutOfResources as exc:
        record.update(loads=False, out_of_resources=str(exc))
    return record


def compile_only(cfg: dict, arch: int) -> dict:
    """Compile for ``arch`` with the JIT's specialisation (16-divisible pointers, sizes and strides)."""
    ptr = DTYPES[cfg["dtype"]][1]
    out_ptr = OUTPUT.get(cfg["dtype"], ptr)
    if cfg.get("descriptor"):
        return _compiled(cfg, arch, mm_desc, *_descriptor_signature(cfg, ptr[1:], out_ptr[1:]))
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
             "stride_cm", "stride_cn"]
    types = [ptr, ptr, out_ptr, "i32", "i32", "i32", "i32", "constexpr", "i32", "constexpr", "i32", "constexpr"]
    signature = dict(zip(names, types, strict=True)) | {"BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                                                         "BLOCK_K": "constexpr"}
    constexprs = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": cfg["BLOCK_M"],
                  "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": cfg["BLOCK_K"]}
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(types) if t != "constexpr"}
    return _compiled(cfg, arch, mm, signature, constexprs, attrs)


def _descriptor_signature(cfg: dict, operand: str, out: str) -> tuple[dict, dict, dict]:
    """mm_desc's signature as the JIT makes it for host TensorDescriptors of the blocks, with 16-divisible
    sizes."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    signature = {"a_desc": f"tensordesc<{operand}[{bm}, {bk}]>", "b_desc": f"tensordesc<{operand}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{out}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
                 "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    return signature, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}


def _compiled(cfg: dict, arch: int, fn: object, signature: dict, constexprs: dict, attrs: dict) -> dict:
    """``fn`` compiled for ``arch`` with cfg's num_stages and num_warps: its metadata.shared, or the error."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    record = dict(cfg)
    try:
        kernel = triton.compile(ASTSource(fn, signature, constexprs=constexprs, attrs=attrs),
                                target=GPUTarget("cuda", arch, 32),
                                options={"num_stages": cfg["num_stages"], "num_warps": cfg["num_warps"]})
    except Exception as exc:  # noqa: BLE001
        record.update(compiled=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                      error_message=_message(exc))
        return record
    record.update(compiled=True, shared=kernel.metadata.shared, metadata_num_stages=kernel.metadata.num_stages)
    return record


def _message(exc: Exception) -> str:
    """The innermost message of a compile error: its last line, without the exception's type."""
    last = [line for line in str(exc).splitlines() if line.strip()][-1][:300]
    return re.sub(r"^\w+\((['\"])(.*)\1\)$", r"\2", last)


def main() -> int:
    """Compile (and on a GPU load) every config and write the records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--arch", type=int, help="compile for this sm (90) without a GPU; no load")
    parser.add_argument("--jobs", type=int, default=8, help="compiling processes (default 8)")
    parser.add_argument("--quick", action="store_true", help="every seventh config")
    parser.add_argument("--wide", action="store_true", help="the wide spread of wide_configs() (compile-only)")
    parser.add_argument("--descriptor", action="store_true",
                        help="the tensor-descriptor matmul (mm_desc) over descriptor_configs() (compile-only)")
    parser.add_argument("--points", action="store_true",
                        help="every num_warps and the types of points_configs() (int8, tf32) instead of configs()")
    parser.add_argument("--b-layout", choices=("n", "k"), default="n",
                        help="B stored N-major (row-major K x N, the default) or K-major (its transpose, on a GPU only)")
    parser.add_argument("--dtype", choices=tuple(DTYPES), action="append",
                        help="only these operand types (repeatable; default all)")
    parser.add_argument("--both-warps", action="store_true", help="every block shape with 4 and with 8 warps")
    args = parser.parse_args()
    start = time.monotonic()
    device = {}
    if args.arch is None:
        import torch

        props = torch.cuda.get_device_properties(0)
        from triton.runtime import driver

        device = {"name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                  "max_shared_mem_optin_bytes": driver.active.utils.get_device_properties(0)["max_shared_mem"],
                  "torch": torch.__version__}
    if args.wide and args.arch is None:
        parser.error("--wide is compile-only: give --arch")
    if args.b_layout == "k" and args.arch is not None:
        parser.error("--b-layout k needs a GPU: the JIT specialises on the tensors' strides")
    todo = wide_configs() if args.wide else points_configs() if args.points else descriptor_configs() \
        if args.descriptor else \
        configs(args.quick, tuple(args.dtype or SPREAD), args.both_warps)
    if args.b_layout == "k":
        todo = [cfg | {"b_layout": "k"} for cfg in todo]
    one = on_gpu if args.arch is None else functools.partial(compile_only, arch=args.arch)
    # Each worker is a process of its own (spawned: CUDA and fork do not mix), with its own context.
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        records = list(pool.map(one, todo, chunksize=4))
    doc = {"triton_version": triton.__version__,
           "kernel": f"tools/triton_truth/collect.py:{'mm_desc' if args.descriptor else 'mm'}",
           "target": device or {"compile_only_arch": args.arch}, "records": records}
    if args.arch is not None:
        doc["kind"] = "compile-only"  # metadata.shared from triton.compile for that arch; nothing was loaded
    with open(args.out, "w") as handle:
        if args.wide:
            # One record a line: thousands of them stay readable and diff line by line.
            head = json.dumps({k: v for k, v in doc.items() if k != "records"}, sort_keys=True)[:-1]
            lines = ",\n".join(json.dumps(r, sort_keys=True) for r in records)
            handle.write(f'{head}, "records": [\n{lines}\n]}}\n')
        else:
            json.dump(doc, handle, indent=1, sort_keys=True)
            handle.write("\n")
    print(f"{len(records)} configs in {time.monotonic() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
