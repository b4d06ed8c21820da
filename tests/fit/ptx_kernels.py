"""CUDA C++ sources that declare shared memory in every form a kernel can, generated from a seed.

Each source mixes: arrays of scalar, vector (float4, int4, double2) and over-aligned struct elements;
one to three dimensions; ``__align__`` on the variable; ``__shared__`` in the kernel, in ``__noinline__``
helpers the kernel calls (directly or through another helper), and at file scope (used by one kernel,
which NVVM demotes into it, or by several, which stays at module scope); and an ``extern __shared__``
dynamic array of a random type. Every byte is touched through a volatile pointer, so nothing is dropped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# C++ element type -> its bytes; the struct types are declared by PRELUDE.
ELEMENTS = {"char": 1, "short": 2, "int": 4, "float": 4, "double": 8, "long long": 8, "float2": 8,
            "float4": 16, "int4": 16, "double2": 16, "S32": 32, "S64": 64, "S128": 128}
PRELUDE = """struct __align__(32) S32 { char c[20]; };
struct __align__(64) S64 { char c[40]; };
struct __align__(128) S128 { char c[72]; };
"""
MAX_ARRAY_BYTES = 3000  # a kernel of a few such arrays stays under the 48 KB static limit


@dataclass(frozen=True)
class Source:
    """One generated translation unit and the kernels (extern "C" names) it defines."""

    text: str
    kernels: tuple[str, ...]


def _array(rng: random.Random, name: str) -> str:
    """A ``__shared__`` declaration of ``name``: a random element, dimensions and sometimes ``__align__``."""
    element = rng.choice(list(ELEMENTS))
    dims: list[int] = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        room = MAX_ARRAY_BYTES // (ELEMENTS[element] * max(1, _product(dims)))
        dims.append(rng.randint(1, max(1, min(room, rng.choice((3, 9, 64, 700))))))
    align = f"__align__({rng.choice((8, 16, 64, 128, 256))}) " if rng.random() < 0.2 else ""
    return f"__shared__ {align}{element} {name}{''.join(f'[{d}]' for d in dims)};"


def _product(values: list[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def _touch(name: str, dynamic: bool = False) -> str:
    """Write one byte of the array and read another back into ``sum``, through a volatile pointer."""
    size = "64" if dynamic else f"sizeof({name})"
    return (f"  ((volatile char*){name})[i % {size}] = (char)i;\n"
            f"  sum += ((volatile char*){name})[(i + 1) % {size}];\n")


def generate(seed: int) -> Source:
    """A source with a few kernels, helpers and file-scope arrays, all drawn from ``seed``."""
    rng = random.Random(seed)
    lines = [PRELUDE]
    shared_globals = [f"g{seed}_{n}" for n in range(rng.choice((0, 0, 1, 2)))]
    lines += [_array(rng, name) for name in shared_globals]
    dynamic = rng.random() < 0.5
    if dynamic:
        element = rng.choice(list(ELEMENTS))
        lines.append(f"extern __shared__ {element} dyn{seed}[];")
    helpers: list[str] = []
    for h in range(rng.choice((0, 1, 2, 3))):
        declared: list[str] = []
        body = "".join(_local(rng, f"h{seed}_{h}_{n}", declared) for n in range(rng.choice((0, 1, 2))))
        body = "".join(declared) + body
        body += "".join(_touch(g) for g in shared_globals if rng.random() < 0.3)
        body += "".join(f"  sum += h{c}(i);\n" for c in range(h) if rng.random() < 0.4)
        lines.append(f"__device__ __noinline__ int h{h}(int i) {{\n  int sum = 0;\n{body}  return sum;\n}}")
        helpers.append(f"h{h}")
    kernels = tuple(f"k{seed}_{n}" for n in range(rng.choice((1, 2, 3))))
    for kernel in kernels:
        declared = []
        body = "".join(_local(rng, f"{kernel}_s{n}", declared) for n in range(rng.choice((0, 1, 2, 3))))
        body = "".join(declared) + body
        body += "".join(_touch(g) for g in shared_globals if rng.random() < 0.6)
        body += _touch(f"dyn{seed}", dynamic=True) if dynamic and rng.random() < 0.7 else ""
        body += "".join(f"  sum += {h}(i);\n" for h in helpers if rng.random() < 0.5)
        lines.append(f'extern "C" __global__ void {kernel}(int* out) {{\n  int i = threadIdx.x;\n  int sum = 0;\n'
                     f"{body}  __syncthreads();\n  out[i] = sum;\n}}")
    return Source("\n".join(lines) + "\n", kernels)


def _local(rng: random.Random, name: str, declared: list[str]) -> str:
    """Declare a function-scope array into ``declared``; return the code that touches it."""
    declared.append(f"  {_array(rng, name)}\n")
    return _touch(name)
