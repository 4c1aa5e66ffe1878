"""Benchmarks of nodice itself, built on the evaluation service.

``kernels`` (``nodice bench kernels``: the bundled kernels against the libraries,
with ``warm`` compiling and auditing side by side before any timing and
``kernels_table`` rendering the report), ``detector`` (``nodice bench detector``:
the gate's detection rate on a labeled pool) and ``ray_jobs`` (either benchmark's
jobs spread over a Ray cluster). How a kernel is timed and scored lives one floor
below, in :mod:`nodice.measuring`.
"""
