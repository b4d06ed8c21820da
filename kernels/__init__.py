"""CUDA C++ probe kernels of bisect_smem, shipped as package data (``bisect_smem.kernels``)."""
