"""bisect_smem: measure how much shared memory a CUDA kernel can really get, and say whether a kernel fits.

The public API (``__all__``; everything else is private and may move): a device's limits, measured now
(``measure_limits``), read from a saved report or baseline (``read_limits``) or published for an
architecture (``profile``, ``profiles``, ``published_limits``); whether a kernel fits them (``fit_bytes``,
``fit_cubin``, ``fit_tile``, ``fit_triton``, ``fit_launcher``, each returning a frozen ``Fit`` of one
``FitResult`` per kernel and target); and a recorded trace explained (``explain_trace``). Errors are
``BisectSmemError``s: ``UsageError`` for a value that cannot be taken, ``BaselineError`` for a saved
report or baseline that cannot be read, ``BackendUnavailable`` where no GPU can measure,
``MeasurementError`` where a measurement could not be completed. See docs/api.md.

The names are resolved on first use, so that ``import bisect_smem`` (and the command line, which imports
it) loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "ArchProfile", "BackendUnavailable", "BaselineError", "BisectSmemError", "Fit", "FitResult",
    "MeasurementError", "Target", "TraceExplanation", "UsageError", "explain_trace", "fit_bytes", "fit_cubin",
    "fit_launcher", "fit_tile", "fit_triton", "measure_limits", "profile", "profiles", "published_limits",
    "read_limits",
]

if TYPE_CHECKING:  # deferred for type checkers only: at run time each name is loaded on first use
    from bisect_smem.api import (
        ArchProfile,
        BackendUnavailable,
        BaselineError,
        BisectSmemError,
        Fit,
        FitResult,
        MeasurementError,
        Target,
        TraceExplanation,
        UsageError,
        explain_trace,
        fit_bytes,
        fit_cubin,
        fit_launcher,
        fit_tile,
        fit_triton,
        measure_limits,
        profile,
        profiles,
        published_limits,
        read_limits,
    )


def __getattr__(name: str) -> Any:
    """A public name, loaded from bisect_smem.api on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'bisect_smem' has no attribute {name!r}")
    # Deferred: the API loads the fit rules and the trace reader; the command line imports this package first.
    from bisect_smem import api

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
