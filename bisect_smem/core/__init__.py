"""core: pure facts and types. No I/O, no CUDA, no imports from any other layer.

Here live the exception hierarchy (errors), the frozen result types and their JSON form (model), the
pure bisection (search), the published per-architecture table (profiles), the hardware rules that
every other layer applies (hardware: footprint, granule rounding, alignment, blocks per SM, thread and
cluster limits, driver attribute ids), byte-size parsing (sizes) and the flat quantities that
baselines and merges compare (quantities). Everything above may import it; it imports only itself.
"""
