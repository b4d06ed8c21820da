"""The schema resolves each record's field types itself (each annotation string once per module) instead of
asking typing for every class: what it resolves must be what typing.get_type_hints says, for every
dataclass of the package."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
import typing

import pytest

import bisect_smem
from bisect_smem.core import schema

SKIPPED = ("__main__", "numba.kernels")  # the entry point runs the tool; numba's kernels need numba-cuda


def _dataclasses() -> list[type]:
    for info in pkgutil.walk_packages(bisect_smem.__path__, "bisect_smem."):
        if not info.name.endswith(SKIPPED):
            importlib.import_module(info.name)
    return sorted({obj for name, module in list(sys.modules.items()) if name.startswith("bisect_smem.")
                   for obj in vars(module).values()
                   if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name},
                  key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


@pytest.mark.parametrize("cls", _dataclasses(), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_field_types_are_typings(cls: type) -> None:
    assert schema._hints(cls) == typing.get_type_hints(cls)


def test_a_name_left_quoted_inside_an_annotation_is_resolved() -> None:
    # dict["Step", int]: the string evaluates to a dict keyed by the text 'Step'; typing resolves it.
    @dataclasses.dataclass
    class Step:
        n: int

    @dataclasses.dataclass
    class Holder:
        done: dict[Step, int]

    Holder.__annotations__["done"] = 'dict["Step", int]'
    module = type(sys)("schema_hints_sample")
    module.Step, module.Holder = Step, Holder
    Holder.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        assert schema._hints(Holder) == {"done": dict[Step, int]}
    finally:
        del sys.modules[module.__name__]
