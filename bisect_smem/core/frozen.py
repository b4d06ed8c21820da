"""``@frozen``: the project's immutable value, a ``dataclass(frozen=True)`` whose ``__eq__``, ``__hash__``
and ``__repr__`` are written once, here, instead of compiled for each class.

Why: on Python 3.11 ``dataclass`` compiles six functions from source for every frozen class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``). Compiling is most of what
creating a class costs, and ``check`` creates some 33 classes to read a report: about half its
start-up over a bare Python (docs/speed.md). The three made here are closures over the class's field
names, which cost no compiling, and behave as dataclasses' own do:

- ``==`` compares the fields with ``compare=True``, in order, of two objects of the very same class
  (anything else is ``NotImplemented``);
- ``hash`` is that of the same fields (``hash=True`` or ``hash=None`` with ``compare``);
- ``repr`` is ``Name(field=value, ...)`` over the fields with ``repr=True``, guarded against recursion.

A method the class defines itself is kept, as dataclasses keeps it. ``dataclasses.fields``, ``replace``,
``asdict`` and ``is_dataclass`` work unchanged: the class is a dataclass.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` of an object, always as a tuple."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


def _add_methods(cls: type) -> None:
    fields = dataclasses.fields(cls)
    compared = _getter(tuple(f.name for f in fields if f.compare))
    hashed = _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fields if f.repr)
    own = cls.__dict__

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({values})"

    if "__repr__" not in own:
        cls.__repr__ = __repr__  # type: ignore[assignment]
    # As dataclasses: a class that defines __eq__ but not __hash__ gets __hash__ = None from Python, which
    # is not a hash of its own.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if "__eq__" not in own:
        cls.__eq__ = __eq__  # type: ignore[assignment]
    if not explicit_hash:
        cls.__hash__ = __hash__  # type: ignore[assignment]
    for method in (__eq__, __hash__, __repr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"


@overload
def frozen(cls: T, /) -> T: ...
@overload
def frozen(*, slots: bool = False, kw_only: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(frozen_default=True)
def frozen(cls: Any = None, /, *, slots: bool = False, kw_only: bool = False) -> Any:
    """``@frozen`` or ``@frozen(slots=True, kw_only=True)``: the class as a frozen dataclass."""

    def wrap(cls: T) -> T:
        made = dataclasses.dataclass(cls, frozen=True, eq=False, repr=False, slots=slots, kw_only=kw_only)
        _add_methods(made)
        return made

    return wrap if cls is None else wrap(cls)
