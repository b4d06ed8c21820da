"""A third fit library, made the documented way (one folder implementing GemmRule, one registry line), as
small as the interface allows: its kernel holds ``depth`` copies of an M x K and an N x K tile of one-byte
elements, and its traced kernels are named ``toy_gemm_MxNxK_dDEPTH``."""

LIBRARY = "Toy"
TOY_VERSION = "0.1"
