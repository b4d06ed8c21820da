"""Static shared memory of a compiled kernel, read without a GPU: from a cubin's ELF sections or a PTX file.

A cubin holds a section ``.nv.shared.<kernel>`` whose size is the kernel's static shared memory (padded
by the linker; on a GPU the driver's answer is used instead).
PTX declares it with ``.shared`` variables inside the entry or, for function-scope arrays, at module
scope; those count for the entries that use them.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from bisect_smem.core.errors import UsageError

RESERVED_WINDOW_BYTES = 1024
_PTX_SHARED = re.compile(r"\.shared\s+(?:\.align\s+(\d+)\s+)?\.(?:b|u|s|f)(8|16|32|64)\s+([\w$]+)(?:\[(\d+)\])?")
_PTX_ENTRY = re.compile(r"\.(?:visible\s+)?\.entry\s+([\w$]+)\s*\(")


def cubin_static_smem(path: Path, kernel: str) -> tuple[str, int]:
    """(kernel's full name, static shared bytes) from an ELF cubin. ``kernel`` may be a unique part of the name."""
    data = _read(path)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise UsageError(f"{path} is not a 64-bit ELF cubin")
    endian = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(endian + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        name_off, _type, _flags, _addr, offset, size = struct.unpack_from(endian + "IIQQQQ", data, shoff + i * shentsize)
        sections.append((name_off, offset, size))
    strtab_offset = sections[shstrndx][1]

    def name_of(off: int) -> str:
        end = data.index(b"\0", strtab_offset + off)
        return data[strtab_offset + off:end].decode(errors="replace")

    names = {name_of(n): size for n, _, size in sections}
    kernels = sorted(n[len(".text."):] for n in names if n.startswith(".text."))
    full = _pick(kernel, kernels, path)
    size = names.get(f".nv.shared.{full}", 0)
    # From sm_90 on, a cubin with a reserved-shared-memory section counts the 1 KB system window inside
    # each kernel's section; the driver's SHARED_SIZE_BYTES does not.
    if any(n.startswith(".nv.shared.reserved") for n in names) and size >= RESERVED_WINDOW_BYTES:
        size -= RESERVED_WINDOW_BYTES
    return full, size


def ptx_static_smem(path: Path, kernel: str) -> tuple[str, int]:
    """(kernel's full name, static shared bytes) from PTX: the ``.shared`` declarations of that entry."""
    text = _read(path).decode(errors="replace")
    entries = [(m.group(1), m.start()) for m in _PTX_ENTRY.finditer(text)]
    full = _pick(kernel, [name for name, _ in entries], path)
    start = next(pos for name, pos in entries if name == full)
    following = [pos for _, pos in entries if pos > start]
    end = following[0] if following else len(text)
    body = text[start:end]
    total = 0
    # Function-scope __shared__ arrays become module-scope declarations: they count where the entry uses them.
    for match in _PTX_SHARED.finditer(text):
        align, bits, name, count = match.groups()
        inside = start <= match.start() < end
        if not inside and not re.search(rf"\b{re.escape(name)}\b", body):
            continue
        size = int(bits) // 8 * int(count or 1)
        alignment = int(align or int(bits) // 8)
        total = -(-total // alignment) * alignment + size
    return full, total


def _pick(wanted: str, names: list[str], path: Path) -> str:
    if wanted in names:
        return wanted
    matches = [n for n in names if wanted in n]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(names) or "none"
    if not matches:
        raise UsageError(f"no kernel {wanted!r} in {path}; kernels: {listed}")
    raise UsageError(f"kernel {wanted!r} is ambiguous in {path}; matches: {', '.join(matches)}")


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
