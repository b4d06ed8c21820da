"""A PTX module's static shared memory per entry, laid out as ptxas lays it out, or refused.

PTX declares shared memory as ``.shared`` variables: in an entry's body (a kernel's ``__shared__``
arrays, which NVVM "demotes" there), in the body of a ``.func`` the entry calls (a ``__noinline__``
helper's), or at module scope (file-scope ``__shared__``, counted by the entries that name them).
An unsized ``.extern .shared`` array is the dynamic shared memory: 0 B static.

ptxas 13.0 ``-v`` and the cubin's ``.nv.shared.<entry>`` section agree on this layout, measured on
hand-written PTX and on NVRTC output (tests/fit/test_ptx_reader.py holds both):

- the entry's own declarations first, in order, used or not; then the module-scope variables that the
  entry or a function it reaches names, in declaration order; then the declarations of each reached
  function, functions in the order they were first declared (prototype or definition);
- each variable at its ``.align`` (default: its element's size), after the previous one;
- where the module declares an unsized ``.extern .shared`` array, the total rounded up to 16 B, or to
  that array's ``.align`` where larger, so the dynamic array starts aligned.

A form this reader does not know (an initializer, ``.shared::cta`` or ``.v8`` in a declaration, the
preprocessor, an unterminated comment) is refused with one line, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import round_up

# Tokens: comments, strings and the directives that end at the line's end, not at ';' (all dropped),
# identifiers with their dots (``ld.shared.f32`` is one token, so only a declaration holds the bare
# ``.shared``), and single punctuation marks.
# The one group holds what is kept; what is dropped matches with the group empty.
_TOKEN = re.compile(r'\.(?:version|target|address_size|file|loc)\b[^\n]*|//[^\n]*|/\*.*?\*/'
                    r'|"(?:[^"\\\n]|\\.)*"|(/\*|[\w$%.:]+|[^\s\w$%.:])', re.ASCII | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_$%][\w$]*", re.ASCII)
# PTX integers: decimal, hex, octal or binary, with an optional U; at most 16 digits (no PTX declares a
# petabyte), so a long string of digits is refused, not multiplied out.
_INTEGER = re.compile(r"(?:0[xX]([0-9a-fA-F]{1,16})|0[bB]([01]{1,16})|0([0-7]{1,16})|([1-9][0-9]{0,15}|0))U?", re.ASCII)
TYPE_BYTES = {
    **dict.fromkeys((".b8", ".u8", ".s8"), 1),
    **dict.fromkeys((".b16", ".u16", ".s16", ".f16", ".bf16"), 2),
    **dict.fromkeys((".b32", ".u32", ".s32", ".f32", ".f16x2", ".bf16x2"), 4),
    **dict.fromkeys((".b64", ".u64", ".s64", ".f64"), 8),
    ".b128": 16,
}
VECTOR_WIDTH = {".v2": 2, ".v4": 4}
MODULE_LINKAGE = {".extern", ".visible", ".weak"}
DYNAMIC_ALIGN_BYTES = 16  # ptxas starts the dynamic array at 16 B at least, whatever its .align says


class PtxUnreadable(ValueError):
    """A PTX form this reader does not read: the message is one line saying which."""


@frozen
class SharedVar:
    """One ``.shared`` variable: its bytes (0 where it is the unsized, dynamic array) and alignment."""

    name: str
    size_bytes: int
    align_bytes: int
    dynamic: bool = False


@dataclass
class Function:
    """An ``.entry`` or ``.func`` body: its own ``.shared`` declarations and every name it uses."""

    name: str
    is_entry: bool
    shared: list[SharedVar] = field(default_factory=list)
    names: set[str] = field(default_factory=set)


@dataclass
class PtxModule:
    """What a PTX file says about shared memory: module-scope variables, functions in declaration order."""

    module_shared: list[SharedVar] = field(default_factory=list)
    functions: dict[str, Function] = field(default_factory=dict)  # first declaration order

    @property
    def entries(self) -> list[str]:
        """The kernels (``.entry``), in file order."""
        return [f.name for f in self.functions.values() if f.is_entry]

    def static_bytes(self, entry: str) -> int:
        """The entry's static shared memory (bytes), as ptxas lays it out."""
        reached = self._reached(entry)
        used = set().union(*(self.functions[name].names for name in reached))
        order = list(self.functions[entry].shared)
        order += [v for v in self.module_shared if v.name in used and not v.dynamic]
        order += [v for f in self.functions.values() if f.name in reached and f.name != entry for v in f.shared]
        total = 0
        for var in order:
            total = round_up(total, var.align_bytes) + var.size_bytes
        dynamic = [v.align_bytes for v in self.module_shared if v.dynamic]
        return round_up(total, max([DYNAMIC_ALIGN_BYTES, *dynamic])) if dynamic else total

    def _reached(self, entry: str) -> set[str]:
        """The entry and every function it names, transitively (a call or a function's address)."""
        reached, todo = {entry}, [entry]
        while todo:
            for name in self.functions[todo.pop()].names:
                if name in self.functions and name not in reached:
                    reached.add(name)
                    todo.append(name)
        return reached


def parse_ptx(text: str) -> PtxModule:
    """Read the ``.shared`` declarations, functions and the names each function uses; PtxUnreadable
    for a form this reader does not know."""
    module = PtxModule()
    tokens = _tokens(text)
    for header, body in _module_statements(tokens):
        if ".entry" in header or ".func" in header:
            _declare_function(module, header, body)
        elif _declares_shared(header):
            module.module_shared += _shared_vars(header, module_scope=True)
    return module


def _tokens(text: str) -> list[str]:
    # findall and list searches run in C: a library's PTX of tens of MB is read in seconds.
    tokens = [token for token in _TOKEN.findall(text) if token]
    if "/*" in tokens:
        raise PtxUnreadable("a /* comment is never closed")
    if "#" in tokens:
        raise PtxUnreadable("it uses the preprocessor (#), which ptxas does not read either: expand it first")
    return tokens


def _module_statements(tokens: list[str]) -> Iterator[tuple[list[str], list[str] | None]]:
    """Module-scope statements: (header tokens, body tokens or None where it ends with ';')."""
    at, begun, opened = 0, 0, -1
    while at < len(tokens):
        if opened < at:  # the next '{' may lie thousands of statements on: looked for once, not per statement
            opened = _find(tokens, "{", at)
        end = min(_find(tokens, ";", at, opened), opened)
        if _find(tokens, "}", at, end) < end:
            raise PtxUnreadable("a } closes no block")
        if end == len(tokens):
            raise PtxUnreadable(f"the file ends inside '{_shown(tokens[begun:])}'")
        header = tokens[begun:end]
        if tokens[end] == "{" and "=" in header:
            at = _closing(tokens, end + 1) + 1  # an initializer, e.g. of a .global array: the statement goes on
            continue
        if tokens[end] == ";":
            yield header, None
            at = begun = end + 1
            continue
        close = _closing(tokens, end + 1)
        if ".entry" in header or ".func" in header:
            yield header, tokens[end + 1:close]
        elif ".section" not in header:  # debug sections hold bytes, not shared memory
            raise PtxUnreadable(f"a {{ block after '{_shown(header)}' is neither a function nor a section")
        at = begun = close + 1


def _find(tokens: list[str], token: str, start: int, stop: int | None = None) -> int:
    """The index of ``token`` in tokens[start:stop], or ``stop`` (the list's end) where it is not there."""
    stop = len(tokens) if stop is None else stop
    try:
        return tokens.index(token, start, stop)
    except ValueError:
        return stop


def _closing(tokens: list[str], start: int) -> int:
    """The index of the '}' that closes the '{' just before ``start``, nested blocks skipped."""
    depth, close = 1, -1
    while True:
        if close < start:  # looked for again only once passed, so deep nesting stays linear
            close = _find(tokens, "}", start)
            if close == len(tokens):
                raise PtxUnreadable("the file ends inside a { block")
        opened = _find(tokens, "{", start, close)
        depth += 1 if opened < close else -1
        start = min(opened, close) + 1
        if depth == 0:
            return close


def _declare_function(module: PtxModule, header: list[str], body: list[str] | None) -> None:
    name = _function_name(header)
    function = module.functions.setdefault(name, Function(name, ".entry" in header))
    if body is None:
        return  # a prototype: it fixes the function's place in the layout order
    function.names |= set(body)
    spaces = [t for t in function.names if t.startswith(".shared::")]
    at = min([_find(body, ".shared", 0), *(_find(body, space, 0) for space in spaces)])
    while at < len(body):
        end = _find(body, ";", at)
        function.shared += _shared_vars(body[_statement_start(body, at):end], module_scope=False)
        at = min([_find(body, ".shared", end), *(_find(body, space, end) for space in spaces)])
    # A function's own variable of a module variable's name hides it there.
    function.names -= {v.name for v in function.shared}


def _statement_start(tokens: list[str], at: int) -> int:
    """The index of the first token of the statement that holds tokens[at]."""
    for index in range(at - 1, -1, -1):
        if tokens[index] in {";", "{", "}"}:
            return index + 1
    return 0


def _function_name(header: list[str]) -> str:
    rest = header[header.index(".entry" if ".entry" in header else ".func") + 1:]
    if rest[:1] == ["("]:  # .func (.param .b32 ret) name (...)
        rest = rest[rest.index(")") + 1:] if ")" in rest else []
    if not rest or not _NAME.fullmatch(rest[0]):
        raise PtxUnreadable(f"no function name in '{_shown(header)}'")
    return rest[0]


def _declares_shared(statement: list[str]) -> bool:
    """Whether a statement declares shared memory: ``.shared``, or a sub-space such as ``.shared::cta``."""
    return any(token == ".shared" or token.startswith(".shared::") for token in statement)


def _shared_vars(statement: list[str], module_scope: bool) -> list[SharedVar]:
    """The variables of one ``.shared`` declaration statement, without its ';'."""
    if ".shared" not in statement:
        space = next(t for t in statement if t.startswith(".shared::"))
        raise PtxUnreadable(f"'{_shown(statement)}': variables are declared in .shared, not {space}")
    at = statement.index(".shared")
    prefix, rest = statement[:at], statement[at + 1:]
    allowed = MODULE_LINKAGE if module_scope else set()
    if any(p not in allowed for p in prefix):
        raise PtxUnreadable(f"'{_shown(statement)}': {' '.join(prefix)} before .shared is not read here")
    if "=" in rest:
        raise PtxUnreadable(f"'{_shown(statement)}': .shared variables take no initializer")
    align = None
    if rest[:1] == [".align"]:
        align = _integer(rest[1]) if len(rest) > 1 else None
        if align is None:
            raise PtxUnreadable(f"'{_shown(statement)}': .align needs a number")
        rest = rest[2:]
        if align < 1 or align & (align - 1):
            raise PtxUnreadable(f"'{_shown(statement)}' has .align {align}; PTX alignments are powers of two")
    width = VECTOR_WIDTH.get(rest[0], 1) if rest else 1
    rest = rest[1:] if width > 1 else rest
    if not rest or rest[0] not in TYPE_BYTES:
        got = f"{rest[0]} is not an" if rest else "no"
        raise PtxUnreadable(f"'{_shown(statement)}': {got} element type of .shared (.b8 to .b128, .f16x2, ...)")
    element = TYPE_BYTES[rest[0]] * width
    extern = ".extern" in prefix
    return [_one_var(declarator, element, align or element, extern, statement)
            for declarator in _split(rest[1:], statement)]


def _split(tokens: list[str], statement: list[str]) -> list[list[str]]:
    declarators: list[list[str]] = [[]]
    for token in tokens:
        if token == ",":
            declarators.append([])
        else:
            declarators[-1].append(token)
    if any(not d for d in declarators):
        raise PtxUnreadable(f"'{_shown(statement)}': an empty name in the list")
    return declarators


def _one_var(declarator: list[str], element: int, align: int, extern: bool, statement: list[str]) -> SharedVar:
    name, dims = declarator[0], declarator[1:]
    if not _NAME.fullmatch(name):
        raise PtxUnreadable(f"'{_shown(statement)}': {name!r} is not a PTX name")
    counts: list[int | None] = []
    while dims:
        if dims[:2] == ["[", "]"]:
            counts.append(None)
            dims = dims[2:]
        elif len(dims) >= 3 and dims[0] == "[" and _integer(dims[1]) is not None and dims[2] == "]":
            counts.append(_integer(dims[1]))
            dims = dims[3:]
        else:
            raise PtxUnreadable(f"'{_shown(statement)}': {' '.join(declarator)} is not name[count]...")
    if None in counts:
        if not extern or counts[0] is not None or None in counts[1:]:
            raise PtxUnreadable(f"'{_shown(statement)}': only an .extern array's first size may be left out")
        return SharedVar(name, 0, align, dynamic=True)
    size = element
    for count in counts:
        size *= count  # type: ignore[operator]  # None was refused above
    if size == 0:
        raise PtxUnreadable(f"'{_shown(statement)}': {name} has 0 B, an incomplete type to ptxas")
    return SharedVar(name, size, align)


def _integer(token: str) -> int | None:
    """A PTX integer literal's value, or None where the token is none."""
    match = _INTEGER.fullmatch(token)
    if match is None:
        return None
    hexadecimal, binary, octal, decimal = match.groups()
    if hexadecimal is not None:
        return int(hexadecimal, 16)
    if binary is not None:
        return int(binary, 2)
    return int(octal, 8) if octal is not None else int(decimal)


def _shown(tokens: list[str]) -> str:
    """A statement as one short line, for a message."""
    text = " ".join(tokens)
    return text if len(text) <= 60 else text[:57] + "..."
