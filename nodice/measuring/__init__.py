"""How a kernel is measured: the floor between the gate and the evaluation service.

``timing`` (how one implementation is timed), ``throughput`` (the score vector of
a candidate beside every baseline), ``score`` (its records), ``ceilings`` (the
device's measured matmul rate and copy bandwidth), ``baselines`` (the libraries
compared against, each with its own BI audit) and ``provenance`` (the machine and
versions a number was made with). It knows tasks and the gate; nothing here
imports the evaluation service, evolution or nodice's own benchmarks.
"""
