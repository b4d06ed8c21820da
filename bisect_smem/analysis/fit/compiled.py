"""Static shared memory of a compiled kernel, read without a GPU: from a cubin's ELF sections or a PTX file.

A cubin holds a section ``.nv.shared.<kernel>`` whose size is the kernel's static shared memory (padded
by the linker; on a GPU the driver's answer is used instead).
PTX declares it with ``.shared`` variables inside the entry or, for function-scope arrays, at module
scope; those count for the entries that use them.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Callable
from pathlib import Path

from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import DEFAULT_RESERVED_BYTES, round_up

MAX_COMPILED_FILE_BYTES = 256 << 20  # a fat library's cubin is tens of MB; /dev/zero is endless
HEAD_BYTES = 64 << 10
ELF_HEADER_BYTES = 64
SECTION_HEADER_BYTES = 64
EM_CUDA = 190  # ELF e_machine of NVIDIA cubins
ELF_BYTE_ORDER = {1: "<", 2: ">"}  # e_ident[EI_DATA]: ELFDATA2LSB, ELFDATA2MSB
# Counts and alignments are ASCII digits, at most 12 of them (no PTX declares a terabyte).
_PTX_SHARED = re.compile(r"\.shared\s+(?:\.align\s+(\d{1,12})\s+)?\.(?:b|u|s|f)(8|16|32|64)\s+([\w$]+)(?:\[(\d{1,12})\])?",
                         re.ASCII)
_PTX_ENTRY = re.compile(r"\.(?:visible\s+)?\.entry\s+([\w$]+)\s*\(", re.ASCII)
_PTX_WORD = re.compile(r"[\w$]+", re.ASCII)


def cubin_static_smem(path: Path, kernel: str | None) -> tuple[str, int]:
    """(kernel's full name, static shared bytes) from an ELF cubin. ``kernel`` may be a unique part of the name, or None
    for the only kernel."""
    data = read_compiled(path, _check_elf_header)
    names = _section_sizes(path, data)
    kernels = sorted(n[len(".text."):] for n in names if n.startswith(".text."))
    full = _pick(kernel, kernels, path)
    size = names.get(f".nv.shared.{full}", 0)
    # From sm_90 on, a cubin with a reserved-shared-memory section counts the 1 KB system window inside
    # each kernel's section; the driver's SHARED_SIZE_BYTES does not.
    if any(n.startswith(".nv.shared.reserved") for n in names) and size >= DEFAULT_RESERVED_BYTES:
        size -= DEFAULT_RESERVED_BYTES
    return full, size


def _check_elf_header(path: Path, head: bytes) -> None:
    if len(head) < ELF_HEADER_BYTES or head[:4] != b"\x7fELF":
        raise UsageError(f"{path} is not a cubin: not an ELF file")
    if head[4] != 2 or head[5] not in ELF_BYTE_ORDER:
        raise UsageError(f"{path} is not a cubin: not a 64-bit ELF file")
    machine, = struct.unpack_from(ELF_BYTE_ORDER[head[5]] + "H", head, 0x12)
    if machine != EM_CUDA:
        raise UsageError(f"{path} is not a cubin: an ELF file for machine {machine}, not CUDA ({EM_CUDA})")


def _section_sizes(path: Path, data: bytes) -> dict[str, int]:
    """Section name -> size, every offset checked against the file: a cut-short cubin is an error, not a crash."""
    endian = ELF_BYTE_ORDER[data[5]]
    try:
        shoff, = struct.unpack_from(endian + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", data, 0x3A)
        if shentsize < SECTION_HEADER_BYTES or not 0 <= shstrndx < shnum or shoff + shnum * shentsize > len(data):
            raise ValueError(f"section headers: {shnum} of {shentsize} B at {shoff}, names in section {shstrndx}")
        sections = [struct.unpack_from(endian + "IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        _name, _type, _flags, _addr, str_offset, str_size = sections[shstrndx]
        if str_offset + str_size > len(data):
            raise ValueError(f"section names at {str_offset}..{str_offset + str_size}")
        strtab = data[str_offset:str_offset + str_size]
        names = {}
        for name_off, _t, _f, _a, _offset, size in sections:
            end = strtab.index(b"\0", name_off)
            names[strtab[name_off:end].decode(errors="replace")] = size
        return names
    except (struct.error, ValueError) as exc:
        raise UsageError(f"{path} is a cut-short or corrupt cubin ({exc}; the file has {len(data)} B)") from None


def ptx_static_smem(path: Path, kernel: str | None) -> tuple[str, int]:
    """(kernel's full name, static shared bytes) from PTX: the ``.shared`` declarations of that entry."""
    text = read_compiled(path, _check_ptx_head).decode(errors="replace")
    entries = [(m.group(1), m.start()) for m in _PTX_ENTRY.finditer(text)]
    full = _pick(kernel, [name for name, _ in entries], path)
    start = next(pos for name, pos in entries if name == full)
    following = [pos for _, pos in entries if pos > start]
    end = following[0] if following else len(text)
    body = text[start:end]
    total = 0
    # Function-scope __shared__ arrays become module-scope declarations: they count where the entry uses
    # them. The entry's words are collected once, so each declaration is one set look-up (linear time).
    used = set(_PTX_WORD.findall(body))
    for match in _PTX_SHARED.finditer(text):
        align, bits, name, count = match.groups()
        inside = start <= match.start() < end
        if not inside and name not in used:
            continue
        size = int(bits) // 8 * int(count or 1)
        alignment = int(align or int(bits) // 8)
        if alignment < 1 or alignment & (alignment - 1):
            raise UsageError(f"{path}: .shared {name} has .align {alignment}; PTX alignments are powers of two")
        total = round_up(total, alignment) + size
    return full, total


def _pick(wanted: str | None, names: list[str], path: Path) -> str:
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise UsageError(f"{path} has {len(names)} kernels: name one with --kernel ({', '.join(names) or 'none'})")
    if wanted in names:
        return wanted
    matches = [n for n in names if wanted in n]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(names) or "none"
    if not matches:
        raise UsageError(f"no kernel {wanted!r} in {path}; kernels: {listed}")
    raise UsageError(f"kernel {wanted!r} is ambiguous in {path}; matches: {', '.join(matches)}")


def _check_ptx_head(path: Path, head: bytes) -> None:
    # PTX is text; NVRTC ends it with one NUL. NUL bytes before that mean a binary file, /dev/zero included.
    if not head.strip(b"\0") or b"\0" in head.rstrip(b"\0"):
        raise UsageError(f"{path} is not PTX: not a text file")


def read_compiled(path: Path, check_head: Callable[[Path, bytes], None]) -> bytes:
    """The bytes of a cubin or PTX file, at most MAX_COMPILED_FILE_BYTES, its first bytes checked by
    ``check_head`` before the rest is read (so /dev/zero or a FIFO cannot be read without end)."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > MAX_COMPILED_FILE_BYTES:
                raise UsageError(f"{path} has {info.st_size} B, more than any compiled kernel file "
                                 f"(at most {MAX_COMPILED_FILE_BYTES} B)")
            head = handle.read(HEAD_BYTES)
            check_head(Path(path), head)
            rest = handle.read(MAX_COMPILED_FILE_BYTES + 1 - len(head))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(head) + len(rest) > MAX_COMPILED_FILE_BYTES:
        raise UsageError(f"{path} is longer than any compiled kernel file (at most {MAX_COMPILED_FILE_BYTES} B)")
    return head + rest
