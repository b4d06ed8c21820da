"""Static shared memory of a compiled kernel, read without a GPU: from a cubin's ELF sections or a PTX file.

A cubin holds a section ``.nv.shared.<kernel>`` whose size is the kernel's static shared memory (padded
by the linker; on a GPU the driver's answer is used instead).
PTX is read by this package's PTX reader (ptx.py) and, where ptxas is installed, by ``ptxas -v`` too.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from bisect_smem.core import input as reader
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import DEFAULT_RESERVED_BYTES

if TYPE_CHECKING:  # deferred: a type only, so that fit without --ptx loads no ptxas runner
    from bisect_smem.devices.ptxas import PtxasAnswer

MAX_COMPILED_FILE_BYTES = 256 << 20  # a fat library's cubin is tens of MB; /dev/zero is endless
HEAD_BYTES = 64 << 10
ELF_HEADER_BYTES = 64
SECTION_HEADER_BYTES = 64
EM_CUDA = 190  # ELF e_machine of NVIDIA cubins
ELF_BYTE_ORDER = {1: "<", 2: ">"}  # e_ident[EI_DATA]: ELFDATA2LSB, ELFDATA2MSB
LISTED_CHARS = 40  # of kernel names in an error line, which also names the file
_PTX_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(sm_\w+)", re.ASCII | re.MULTILINE)


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


@frozen
class StaticSmem:
    """A kernel's static shared memory (bytes) read from a compiled file, and, for people, from where."""

    kernel: str
    static_bytes: int
    source: str


def ptx_static_smem(path: Path, kernel: str | None) -> tuple[str, int]:
    """(kernel's full name, static shared bytes) from PTX, as ptx_static reads them."""
    found = ptx_static(path, kernel)
    return found.kernel, found.static_bytes


def ptx_static(path: Path, kernel: str | None, ptxas: Path | None | bool = True) -> StaticSmem:
    """A PTX entry's static shared memory: read by the PTX reader always and, where ptxas is found (or
    given as ``ptxas``; False for none), by ``ptxas -v`` too, whose answer is preferred; the source says
    which and whether they agree. A form the reader refuses is an error unless ptxas read it."""
    # deferred: only --ptx needs the PTX reader and ptxas (a subprocess); fit's other paths start without them
    from bisect_smem.analysis.fit.ptx import PtxUnreadable, parse_ptx
    from bisect_smem.devices import ptxas as ptxas_tool

    text = read_compiled(path, _check_ptx_head).decode(errors="replace")
    try:
        module, refused = parse_ptx(text), ""
    except PtxUnreadable as exc:
        module, refused = None, str(exc)
    tool = ptxas_tool.find_ptxas() if ptxas is True else ptxas or None
    target = _PTX_TARGET.search(text)
    if module is not None:
        full = _pick(kernel, module.entries, path)
        answer, why = _assemble(ptxas_tool, tool, path, target, full)
    else:
        answer, why = _assemble(ptxas_tool, tool, path, target, None)
        if answer is None:
            raise UsageError(f"{path}: {refused}")
        full = _pick(kernel, sorted(answer.smem_bytes), path)
    read = module.static_bytes(full) if module is not None else None
    assembled = answer.smem_bytes.get(full) if answer is not None else None
    if assembled is None:
        if read is None:
            raise UsageError(f"{path}: {refused}")
        return StaticSmem(full, read, f"read from the PTX ({why or f'ptxas did not list {full}'})")
    by = f"ptxas {answer.version} -v"  # type: ignore[union-attr]  # assembled is set only with an answer
    if read is None:
        return StaticSmem(full, assembled, f"{by} (the PTX reader refused it: {refused})")
    if read != assembled:
        return StaticSmem(full, assembled, f"{by} (the PTX reader says {read} B)")
    return StaticSmem(full, assembled, f"read from the PTX; {by} agrees")


def _assemble(ptxas_tool: ModuleType, tool: Path | None, path: Path, target: re.Match[str] | None,
              entry: str | None) -> tuple[PtxasAnswer | None, str]:
    """ptxas's answer (``ptxas_tool`` is devices/ptxas.py, which ptx_static loaded), or None and why there is
    none."""
    if tool is None:
        return None, "no ptxas found to check it"
    if target is None:
        return None, "no .target sm_XX for ptxas to assemble it for"
    try:
        return ptxas_tool.ptxas_smem(tool, path, target.group(1), entry), ""
    except ptxas_tool.PtxasFailed as exc:
        return None, f"ptxas could not assemble it: {exc}"


def _pick(wanted: str | None, names: list[str], path: Path) -> str:
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise UsageError(f"{path} has {len(names)} kernels: name one with --kernel ({_listed(names)})")
    if wanted in names:
        return wanted
    matches = [n for n in names if wanted in n]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(f"no kernel {wanted!r} in {path}; kernels: {_listed(names)}")
    raise UsageError(f"kernel {wanted!r} is ambiguous in {path}; matches: {_listed(matches)}")


def _listed(names: list[str]) -> str:
    """Kernel names for a one-line message: as many as fit in LISTED_CHARS, then how many more (a
    library's file holds thousands, and the error stays one readable line)."""
    shown: list[str] = []
    for name in names:
        if len(", ".join([*shown, name])) > LISTED_CHARS:
            break
        shown.append(name)
    if not shown and names:
        shown = [names[0][:LISTED_CHARS - 3] + "..."]  # one mangled name can be longer than the line
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "") if names else "none"


def _check_ptx_head(path: Path, head: bytes) -> None:
    # PTX is text; NVRTC ends it with one NUL. NUL bytes before that mean a binary file, /dev/zero included.
    if not head.strip(b"\0") or b"\0" in head.rstrip(b"\0"):
        raise UsageError(f"{path} is not PTX: not a text file")


def read_compiled(path: Path, check_head: Callable[[Path, bytes], None]) -> bytes:
    """The bytes of a cubin or PTX file, at most MAX_COMPILED_FILE_BYTES, its first bytes checked by
    ``check_head`` before the rest is read (so /dev/zero cannot be read without end); a FIFO or a socket is
    refused before it is opened, which would wait for a writer."""
    reader.refuse_waiting(str(path))
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
