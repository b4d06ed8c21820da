"""core: pure facts and types. No CUDA, no imports from any other layer, and no I/O but reading back the
tool's own files (saved) and the one atomic file replace (atomic).

Here live the exception hierarchy with each error's exit code (errors), the frozen result types (model),
verdict rows as data (rows), what a device reports, typed (attributes), the one walker over the JSON
files read back (schema), the pure bisection (search), the published per-architecture table (profiles),
the hardware rules and cc gates every other layer applies (hardware), the levels (levels), byte-size
parsing (sizes) and the flat quantities that baselines and merges compare (quantities). Everything above
may import it; it imports only itself.
"""
