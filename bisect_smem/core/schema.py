"""One walker over the dataclasses for every JSON file the tool reads back (reports, baselines): the
shape check, then the dataclasses built from the checked JSON.

The check: each field of the dataclass a value becomes must be present where required and of its
declared type, else a SchemaError naming the field, e.g. ``field devices[0].measured.residency[3].threads
must be an integer (got '4')``. It is compiled once per type into nested closures, and the field's path is
assembled only when a check fails, so a fleet of reports is checked quickly. A reader that uses only part
of a file (merge) names the fields it leaves unread in ``skip``: they are neither required nor checked.

The build (``construct``): a field present in the JSON is converted by its declared type (lists become
tuples where the type says tuple, objects become their dataclass, strings their enum), a field absent takes
its default, and a field absent without a default is a KeyError. It is compiled once per type as well.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from bisect_smem.core.errors import BaselineError

Checker = Callable[[Any], None]
Builder = Callable[[Any], Any]
_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
INT_LIMIT = 1 << 63  # every integer the tool writes fits in 64 bits (typed fields: their declared bounds)
MAX_FREE_DEPTH = 8  # how deep a free-form value (a context entry, an event) may nest; the tool writes scalars
_SCALARS = (str, float, bool, type(None))


class SchemaError(BaselineError):
    """A field of a report or baseline is missing or of the wrong type (exit 2)."""


class _Mismatch(Exception):
    """Raised by a checker; containers prepend their key on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem, self.path = problem, []


def check(data: Any, cls: type, where: str = "", skip: frozenset[str] = frozenset()) -> None:
    """Raise SchemaError when ``data`` is not the JSON form of dataclass ``cls``; the fields named in
    ``skip`` by dotted path without indexes (``devices.verdicts``) are left unchecked."""
    try:
        _checker(cls, skip)(data)
    except _Mismatch as exc:
        path = "".join(reversed(exc.path))
        path = (where + path) if where else path.lstrip(".")
        raise SchemaError(f"field {path} {exc.problem}" if path else f"the document {exc.problem}") from None


def build(data: Any, cls: type, source: str, where: str = "",
          values: Callable[[Any], None] | None = None) -> Any:
    """``construct(data, cls)`` after the shape check and then ``values(data)`` (which raises SchemaError for
    a value no device can have); any failure is a SchemaError naming ``source``."""
    try:
        check(data, cls, where)
        if values is not None:
            values(data)
        return construct(data, cls)
    except SchemaError as exc:
        raise SchemaError(f"{source}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaError(f"{source}: not a valid {cls.__name__} ({type(exc).__name__}: {exc})") from None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _nullable(tp: Any) -> bool:
    return tp is Any or tp is type(None) or (_is_union(tp) and type(None) in typing.get_args(tp))


def _expected(tp: Any) -> str:
    if tp in _NAMES:
        return _NAMES[tp]
    return "a list" if typing.get_origin(tp) in (tuple, list) else "an object"


def _show(value: Any) -> str:
    text = type(value).__name__ if isinstance(value, dict | list) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(expected: str, value: Any) -> _Mismatch:
    return _Mismatch(f"must be {expected} (got {_show(value)})")


@functools.cache
def _checker(tp: Any, skip: frozenset[str] = frozenset()) -> Checker:
    """A function that raises _Mismatch when a JSON value is not of type ``tp`` (``skip``: unchecked fields
    of the dataclasses inside ``tp``, by dotted path)."""
    if tp is Any:
        return _free_checker
    if dataclasses.is_dataclass(tp):
        return _dataclass_checker(tp, skip)
    if isinstance(tp, type) and issubclass(tp, enum.StrEnum):
        # Any string: a value this version does not know reads as the enum's own fallback member.
        return _plain_checker((str,), "a string", False)
    if _is_union(tp):
        return _union_checker(tp, skip)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (tuple, list):
        return _list_checker(args if origin is tuple else (args[0], Ellipsis), skip)
    if origin is dict:
        return _dict_checker(_checker(args[1], skip))
    return _plain_checker((tp,) if tp is not float else (int, float), _expected(tp), tp is bool)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The dataclass's field types, as ``typing.get_type_hints`` gives them, resolved once for its checker
    and its builder. Each annotation is a string (``from __future__ import annotations``) that
    get_type_hints compiles again for every class; here each string is evaluated once per module."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        for name, text in base.__dict__.get("__annotations__", {}).items():
            hints[name] = _evaluated(text, base.__module__) if isinstance(text, str) else text
    if not all(map(_resolved, hints.values())):
        return typing.get_type_hints(cls)  # a name left quoted inside an annotation: typing resolves those
    return hints


def _resolved(tp: Any) -> bool:
    return not isinstance(tp, str | typing.ForwardRef) and all(map(_resolved, typing.get_args(tp)))


@functools.cache
def _evaluated(text: str, module: str) -> Any:
    """An annotation of the package's own, in the names of the module that wrote it."""
    return eval(text, vars(sys.modules[module]))  # the text is an annotation in the package's own source


def _dataclass_checker(cls: type, skip: frozenset[str]) -> Checker:
    hints = _hints(cls)
    known = frozenset(f.name for f in dataclasses.fields(cls))
    fields = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        inner = frozenset(p.removeprefix(f"{f.name}.") for p in skip if p.startswith(f"{f.name}."))
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields.append((f.name, _checker(hints[f.name], inner), not has_default and not _nullable(hints[f.name])))

    def check_object(value: Any) -> None:
        if not isinstance(value, dict):
            raise _fail("an object", value)
        present = 0
        for name, item, required in fields:
            if name in value:
                present += 1
                try:
                    item(value[name])
                except _Mismatch as exc:
                    exc.path.append(f".{name}")
                    raise
            elif required:
                exc = _Mismatch("is missing")
                exc.path.append(f".{name}")
                raise exc
        if len(value) > present:  # keys this version does not know (or leaves unread): free-form values
            _check_unknown(value, known)
    return check_object


def _check_unknown(value: dict[str, Any], known: frozenset[str]) -> None:
    for key, entry in value.items():
        if key not in known:
            try:
                _free_checker(entry)
            except _Mismatch as exc:
                exc.path.append(f".{key}")
                raise


def _dict_checker(item: Checker) -> Checker:
    def check_dict(value: Any) -> None:
        if not isinstance(value, dict):
            raise _fail("an object", value)
        for key, entry in value.items():
            try:
                item(entry)
            except _Mismatch as exc:
                exc.path.append(f".{key}")
                raise
    return check_dict


def _list_checker(args: tuple[Any, ...], skip: frozenset[str]) -> Checker:
    if len(args) == 2 and args[1] is Ellipsis:
        items = None
        item = _checker(args[0], skip)
    else:
        items = [_checker(a, skip) for a in args]

    def check_list(value: Any) -> None:
        if not isinstance(value, list) or (items is not None and len(value) != len(items)):
            raise _fail("a list" if items is None else f"a list of {len(items)}", value)
        for i, entry in enumerate(value):
            try:
                (item if items is None else items[i])(entry)
            except _Mismatch as exc:
                exc.path.append(f"[{i}]")
                raise
    return check_list


def _union_checker(tp: Any, skip: frozenset[str]) -> Checker:
    args = typing.get_args(tp)
    nullable = type(None) in args
    options = [a for a in args if a is not type(None)]
    expected = " or ".join([*(_expected(a) for a in options), *(["null"] if nullable else [])])
    if len(options) == 1:
        only = _checker(options[0], skip)

        def check_optional(value: Any) -> None:
            if value is not None:
                only(value)
        return check_optional
    if all(a in _NAMES for a in options):
        accepted = (*options, *((int,) if float in options else ()), *((type(None),) if nullable else ()))
        return _plain_checker(accepted, expected, bool in options)
    checkers = [_checker(a, skip) for a in options]

    def check_union(value: Any) -> None:
        if value is None and nullable:
            return
        for item in checkers:
            try:
                item(value)
                return
            except _Mismatch:
                continue
        raise _fail(expected, value)
    return check_union


def _plain_checker(accepted: tuple[type, ...], expected: str, bool_ok: bool) -> Checker:
    def check_plain(value: Any) -> None:
        # bool is an int to Python but not to JSON: true is not a byte count.
        if not isinstance(value, accepted) or (not bool_ok and isinstance(value, bool)):
            raise _fail(expected, value)
    return check_plain


def _free_checker(value: Any) -> None:
    """A value of any type (``Any``): nested at most MAX_FREE_DEPTH deep, its integers of at most 64 bits.
    Walked without recursion, so no depth of nesting can exhaust the stack."""
    if isinstance(value, _SCALARS):
        return
    todo = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if type(item) is int:
            if not -INT_LIMIT <= item < INT_LIMIT:
                raise _fail("an integer of at most 64 bits", item)
        elif isinstance(item, dict | list):
            if depth >= MAX_FREE_DEPTH:
                raise _Mismatch(f"is nested more than {MAX_FREE_DEPTH} deep")
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


def construct(data: Any, cls: type) -> Any:
    """The dataclass ``cls`` built from its JSON form (see the module's docstring): KeyError for a required
    field that is missing, TypeError or ValueError for what its constructor refuses."""
    return _builder(cls)(data)


def _same(value: Any) -> Any:
    return value


@functools.cache
def _builder(tp: Any) -> Builder:
    """A function that turns the JSON form of type ``tp`` into its Python value."""
    if dataclasses.is_dataclass(tp):
        return _dataclass_builder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    if _is_union(tp):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(options) == 1:
            only = _builder(options[0])
            return lambda value: None if value is None else only(value)
        return _same  # unions of plain values (int | str | None) are the values themselves
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _builder(args[0])
            return lambda value: tuple(map(item, value))
        items = [_builder(a) for a in args]
        return lambda value: tuple(b(v) for b, v in zip(items, value, strict=True))
    if origin is list:
        item = _builder(args[0])
        return lambda value: list(map(item, value))
    if origin is dict:
        entry = _builder(args[1])
        return lambda value: {key: entry(v) for key, v in value.items()}
    return _same


def _dataclass_builder(cls: type) -> Builder:
    hints = _hints(cls)
    fields = [(f.name, _builder(hints[f.name]),
               f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
              for f in dataclasses.fields(cls) if f.init]

    def build_object(value: Any) -> Any:
        kwargs = {}
        for name, item, has_default in fields:
            if name in value:
                kwargs[name] = item(value[name])
            elif not has_default:
                raise KeyError(name)
        return cls(**kwargs)
    return build_object
