"""Triton's matmul counted in Triton's own bytes: the shared memory Triton TRITON_VERSION's compiler
gives the tutorial matmul (``kernel.metadata.shared``), from its layouts (layouts.py), its layout
conversion's swizzled scratch (swizzle.py), its software pipeliner's buffers and its allocator
(matmul.py, allocation.py). Checked against real compiles of TRITON_VERSION
(tests/data/triton_matmul_*.json, made by tools/triton_truth/collect.py)."""

LIBRARY = "Triton"  # as a person names it
TRITON_VERSION = "3.6.0"
# fit's Triton options, which the option parser reads without loading the arithmetic (library.py):
WARPS = (1, 2, 4, 8, 16)  # the num_warps the model is checked against (Triton's default is 4)
LOADS = ("pointer", "descriptor")  # how A and B are loaded: tl.load of pointer blocks, or tensor descriptors (TMA)
B_LAYOUTS = ("k", "n")  # B K-major (stored N x K) or N-major (K x N)
