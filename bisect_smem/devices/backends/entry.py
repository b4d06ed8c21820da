"""One backend's line in the table (table.py): its name, what it needs installed, and where its class is.

A backend's package (cupy/, numba/, sim/) declares its entry in its ``__init__``, which imports nothing but
this module, so reading the table loads no backend's code and none of the libraries a backend uses: those
load when a backend is built, and what is installed is asked of the import system only when asked here.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bisect_smem.core.frozen import frozen

if TYPE_CHECKING:
    # Deferred to type checking: the protocol's module loads the driver binding, which the table never needs.
    from bisect_smem.devices.backends.base import Backend


@frozen
class BackendEntry:
    """A backend as the table knows it.

    ``factory`` is ``"module:attribute"``: a real backend's class, built with no arguments, or for a simulated
    one a callable that takes the ``--simulate`` texts. ``required_modules`` are the importable names it needs
    (a dotted one is looked up by its top package, so asking imports nothing).
    """

    name: str
    factory: str
    required_modules: tuple[str, ...] = ()
    simulated: bool = False  # models devices from --simulate texts rather than reaching a GPU
    validates: bool = False  # runs --level full's validation kernels (the march, the residency check)

    def __post_init__(self) -> None:
        if ":" not in self.factory:
            raise ValueError(f"factory must be 'module:attribute' (got {self.factory!r})")

    def missing_module(self) -> str | None:
        """The first required module that is not installed here, or None when all are."""
        for module in self.required_modules:
            if importlib.util.find_spec(module.split(".")[0]) is None:
                return module
        return None

    def build(self, sim_specs: Sequence[str] = ()) -> Backend:
        """The backend, its module imported now (``sim_specs``: the --simulate texts, for a simulated one)."""
        module, attribute = self.factory.split(":")
        make = getattr(importlib.import_module(module), attribute)
        return make(tuple(sim_specs)) if self.simulated else make()
