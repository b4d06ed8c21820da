"""Backends: the ways bisect_smem reaches a device. Exactly one is selected by name from the table
(table.py), and a device is opened again, in another process, by its address.

Each backend is a package (cupy/, numba/, sim/) whose ``__init__`` is its entry in the table; what they
share is here: the Backend protocol and its one CUDA-error funnel (base), the probe families (families),
batched launches (batches), the driver binding (libcuda) and cuda-bindings calls (driver_calls). This file
imports nothing, so a worker that starts with the driver binding loads no backend and not the table.
"""
