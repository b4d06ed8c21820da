"""Operand and output types as CUTLASS's builders see them: bits per element, the shared-memory element
type the builder allocates (F8F6F4 kernels store fp4 and fp6 in one byte), and block scaling (the scale
factors' vector size: nvfp4 one ue4m3 factor per 16 elements, the MX types one ue8m0 per 32)."""

from __future__ import annotations

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen


@frozen
class Operand:
    """A GEMM operand type: ``bits`` per element; ``scale_vector`` elements per scale factor (0: not
    block-scaled); ``kind``: 'f16', 'tf32', 'f8', 'i8', 'f6', 'f4'."""

    name: str
    bits: int
    kind: str
    scale_vector: int = 0
    byte_elements: bool = False  # taken through the MXF8F6F4 MMA: a 4- or 6-bit element takes a byte in smem

    @property
    def block_scaled(self) -> bool:
        """Does the operand carry scale factors (nvfp4, mxfp4, mxfp6, mxfp8)?"""
        return self.scale_vector > 0


OPERANDS = {o.name: o for o in (
    Operand("fp16", 16, "f16"), Operand("bf16", 16, "f16"), Operand("tf32", 32, "tf32"),
    Operand("fp32", 32, "tf32"), Operand("e4m3", 8, "f8"), Operand("e5m2", 8, "f8"), Operand("int8", 8, "i8"),
    Operand("e3m2", 6, "f6"), Operand("e2m3", 6, "f6"), Operand("e2m1", 4, "f4"),
    Operand("nvfp4", 4, "f4", 16), Operand("mxfp4", 4, "f4", 32), Operand("mxfp6", 6, "f6", 32),
    Operand("mxfp8", 8, "f8", 32),
    # mxfp4 through the MXF8F6F4 schedule (KernelTmaWarpSpecialized1SmMxf8f6f4Sm100, and the MoE launcher's
    # MXFPX weights): 1 B an element in shared memory, where --dtype mxfp4 is the packed MXF4 schedule.
    Operand("mxfp4-f8f6f4", 4, "f4", 32, True))}
ALIASES = {"fp8": "e4m3", "fp6": "e3m2", "fp4": "e2m1"}
# C and D: the epilogue's types; void C means no source is read.
OUTPUT_BITS = {"void": 0, "fp16": 16, "bf16": 16, "fp32": 32, "e4m3": 8, "e5m2": 8, "int8": 8}


def operand(name: str, option: str = "--dtype") -> Operand:
    """The operand type named ``name`` (fp8, fp6 and fp4 are e4m3, e3m2 and e2m1); unknown names list the valid ones."""
    key = ALIASES.get(name, name)
    if key not in OPERANDS:
        raise UsageError(f"unknown {option} {name!r}; valid: {', '.join([*OPERANDS, *ALIASES])}")
    return OPERANDS[key]


def output_bits(name: str, option: str) -> int:
    """Bits of a C or D element (``void``: 0, only for C)."""
    if name not in OUTPUT_BITS or (name == "void" and option != "--c-dtype"):
        valid = [n for n in OUTPUT_BITS if n != "void" or option == "--c-dtype"]
        raise UsageError(f"unknown {option} {name!r}; valid: {', '.join(valid)}")
    return OUTPUT_BITS[name]
