"""Triton's matmul counted in Triton's own bytes: the shared memory Triton TRITON_VERSION's compiler
gives the tutorial matmul (``kernel.metadata.shared``), from its layouts (layouts.py), its layout
conversion's swizzled scratch (swizzle.py), its software pipeliner's buffers and its allocator
(matmul.py, allocation.py). Checked against real compiles of TRITON_VERSION
(tests/data/triton_matmul_*.json, made by tools/triton_truth/collect.py)."""

LIBRARY = "Triton"  # as a person names it
TRITON_VERSION = "3.6.0"
