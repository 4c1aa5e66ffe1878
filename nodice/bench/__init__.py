"""Benchmarking, in one place.

Measuring a kernel (used by the evaluation service): ``timing`` (how one
implementation is timed), ``throughput`` (the score vector of a candidate beside
every baseline), ``score`` (its records), ``ceilings`` (the device's measured
matmul rate and copy bandwidth), ``baselines`` (the libraries compared against).

Benchmarks of nodice itself, built on the evaluation service: ``kernels``
(``nodice bench kernels``: the bundled kernels against the libraries) and
``detector`` (``nodice bench detector``: the gate's detection rate on a labeled pool).
"""
