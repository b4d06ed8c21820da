"""bisect_smem: measure how much shared memory a CUDA kernel can really get."""

__version__ = "0.1.0"
