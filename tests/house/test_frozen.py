"""``@frozen`` (core/frozen.py) behaves as ``dataclass(frozen=True)`` does: each shape of class below is
made both ways, and equality, hash, repr, immutability and the dataclass helpers are compared between them.
And the package makes every frozen dataclass with it, so that no class pays for the compiled methods."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, field
from pathlib import Path
from typing import ClassVar

import pytest

from bisect_smem.core.frozen import frozen

PACKAGE = Path(__file__).resolve().parents[2] / "bisect_smem"


def _shapes(make):
    """The same classes, made by ``make`` (a decorator factory taking dataclass options)."""

    @make()
    class Empty:
        pass

    @make()
    class One:
        a: int

    @make()
    class Many:
        a: int
        b: str = "x"
        c: tuple[int, ...] = field(default_factory=tuple)

    @make()
    class Hidden:
        a: int
        secret: str = field(default="s", repr=False)
        cache: int = field(default=0, compare=False)
        keyed: list[int] = field(default_factory=list, hash=False)

    @make()
    class OwnEq:
        a: int
        b: int = 0

        def __eq__(self, other):
            return isinstance(other, OwnEq) and self.a == other.a

    @make()
    class OwnRepr:
        a: int

        def __repr__(self):
            return "mine"

    @make()
    class Base:
        a: int

    @make()
    class Child(Base):
        b: int = 2

    @make()
    class Derived:
        a: int
        kind: ClassVar[str] = "derived"
        double: int = field(init=False)

        def __post_init__(self):
            object.__setattr__(self, "double", 2 * self.a)

    @make(slots=True)
    class Slotted:
        a: int
        b: int = 1

    @make(kw_only=True)
    class Keywords:
        a: int
        b: int = 1

    return {c.__name__: c for c in (Empty, One, Many, Hidden, OwnEq, OwnRepr, Base, Child, Derived, Slotted, Keywords)}


def _stdlib(**options):
    return lambda cls: dataclasses.dataclass(cls, frozen=True, **options)


def _ours(**options):
    return frozen(**options) if options else frozen


STDLIB, OURS = _shapes(_stdlib), _shapes(_ours)
ARGS = {"Empty": [{}], "One": [{"a": 1}, {"a": 2}], "Many": [{"a": 1}, {"a": 1, "b": "y", "c": (1,)}],
        "Hidden": [{"a": 1}, {"a": 1, "secret": "t", "cache": 9}, {"a": 2, "keyed": [1]}],
        "OwnEq": [{"a": 1}, {"a": 1, "b": 5}, {"a": 2}], "OwnRepr": [{"a": 1}], "Base": [{"a": 1}],
        "Child": [{"a": 1}, {"a": 1, "b": 3}],
        "Derived": [{"a": 1}, {"a": 2}], "Slotted": [{"a": 1}, {"a": 1, "b": 2}],
        "Keywords": [{"a": 1}, {"a": 1, "b": 7}]}
PAIRS = [(name, left, right) for name, kwargs in ARGS.items() for left in kwargs for right in kwargs]


def _hash(obj):
    try:
        return ("hash", hash(obj))
    except TypeError as exc:
        return ("unhashable", str(exc))


@pytest.mark.parametrize(("name", "left", "right"), PAIRS)
def test_equality_and_hash_as_dataclasses(name, left, right):
    ours, theirs = OURS[name], STDLIB[name]
    assert (ours(**left) == ours(**right)) == (theirs(**left) == theirs(**right))
    assert (ours(**left) != ours(**right)) == (theirs(**left) != theirs(**right))
    # The very hash dataclasses gives (the tuple of the same fields), and unhashable exactly where theirs is.
    assert _hash(ours(**left)) == _hash(theirs(**left))


@pytest.mark.parametrize(("name", "kwargs"), [(n, k) for n, ks in ARGS.items() for k in ks])
def test_repr_immutability_and_helpers_as_dataclasses(name, kwargs):
    ours, theirs = OURS[name](**kwargs), STDLIB[name](**kwargs)
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    assert dataclasses.replace(ours) == ours
    for attribute in (*kwargs, "new"):
        assert _refusal(setattr, ours, attribute, 0) == _refusal(setattr, theirs, attribute, 0)
        assert _refusal(delattr, ours, attribute) == _refusal(delattr, theirs, attribute)
    if kwargs:
        assert _refusal(setattr, ours, next(iter(kwargs)), 0) is FrozenInstanceError


def _refusal(action, *args):
    """The class of what ``action(*args)`` raised, or None."""
    try:
        action(*args)
    except Exception as exc:  # noqa: BLE001 - compared, whatever it is
        return type(exc)
    return None


def test_no_equality_across_classes():
    assert OURS["Base"](a=1) != OURS["Child"](a=1)
    assert OURS["One"](a=1) != STDLIB["One"](a=1)
    assert OURS["One"](a=1) != (1,)
    assert OURS["One"].__eq__(OURS["One"](a=1), (1,)) is NotImplemented


def test_a_recursive_value_is_shown_as_dataclasses_show_it():
    ours, theirs = OURS["One"](a=[]), STDLIB["One"](a=[])
    ours.a.append(ours)
    theirs.a.append(theirs)
    assert repr(ours) == repr(theirs)
    assert repr(ours).endswith("One(a=[...])")


def test_keyword_only_and_positional_as_asked():
    with pytest.raises(TypeError):
        OURS["Keywords"](1)
    assert OURS["Many"](1, "y") == OURS["Many"](a=1, b="y")


def test_pickled_and_back():
    assert pickle.loads(pickle.dumps(PICKLED(3, "x"))) == PICKLED(3, "x")


@frozen
class PICKLED:  # module level: pickle finds a class by its name
    a: int
    b: str


def test_every_frozen_dataclass_of_the_package_is_made_with_frozen():
    """``dataclass(frozen=True)`` compiles six methods per class at import; ``@frozen`` three."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                for deco in node.decorator_list:
                    if (isinstance(deco, ast.Call) and getattr(deco.func, "id", getattr(deco.func, "attr", "")) == "dataclass"
                            and any(k.arg == "frozen" for k in deco.keywords)):
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert found == [], "use @frozen (core/frozen.py) for these: " + ", ".join(found)
