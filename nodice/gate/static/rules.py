"""The rules catalogue: every static finding is one named rule with a mechanism and repair guidance.

A rule says *why* a flow breaks batch invariance (the mechanism) and *what to do*
about it (the guidance), so that a person or an agent can act on a finding without
reading the analyzer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Mechanism = Literal[
    "work_partitioning",
    "reduction_order",
    "algorithm_selection",
    "expert_routing",
    "rng",
    "atomics",
    "autotune",
    "opaque",
]

MECHANISMS: tuple[str, ...] = get_args(Mechanism)


@dataclass(frozen=True)
class Rule:
    id: str
    mechanism: Mechanism
    title: str
    guidance: str
    severity: Literal["violation", "unresolved"] = "violation"


SPLIT_GUIDANCE = (
    "fix the split size, not the number of splits: derive the split count from the reduction "
    "length alone (e.g. splits = cdiv(K, SPLIT_SIZE) with a constant SPLIT_SIZE), never from the "
    "batch size, the grid or the SM count"
)
_TILE_GUIDANCE = (
    "derive the tile from the hidden size only: a reduction tile (BLOCK_K, BLOCK_H, BLOCK_N over "
    "the KV axis …) must be a function of the reduction length, never of the batch size"
)

RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "split_count_from_batch",
            "work_partitioning",
            "the number of splits of a reduction depends on the batch",
            SPLIT_GUIDANCE,
        ),
        Rule(
            "protected_param_from_batch",
            "work_partitioning",
            "a batch-dependent value reaches a parameter the contract protects",
            "compute the protected parameter from per-sample dimensions only (never from the batch "
            "size, a sample's position or its batchmates)",
        ),
        Rule(
            "reduction_tile_from_batch",
            "reduction_order",
            "the tile of a reduction axis depends on the batch",
            _TILE_GUIDANCE,
        ),
        Rule(
            "reduction_range_from_batch",
            "work_partitioning",
            "the part of the reduction a program covers depends on the batch",
            "give every program a reduction range fixed by the reduction length: a grid axis or loop "
            "bound that splits a reduction must not scale with the batch",
        ),
        Rule(
            "launch_option_from_batch",
            "reduction_order",
            "a launch option that shapes a cross-thread reduction depends on the batch",
            "fix num_warps for kernels that reduce with tl.sum/tl.reduce: the warp count decides the "
            "reduction tree; choose it from the reduction length only",
        ),
        Rule(
            "algorithm_selection_by_batch",
            "algorithm_selection",
            "a batch-derived condition chooses which kernel or algorithm runs",
            "run one kernel for every batch size; if small batches need another schedule, it must "
            "reduce in exactly the same order, or choose the path from per-sample dimensions only",
        ),
        Rule(
            "precision_from_batch",
            "algorithm_selection",
            "a tensor whose dtype depends on the batch reaches a kernel: the precision is chosen per batch",
            "compute every batch size in the same dtype: convert (or not) for all batch sizes alike, or "
            "choose the precision from per-sample sizes only",
        ),
        Rule(
            "autotune_key_has_batch",
            "autotune",
            "the autotuner picks a configuration per batch size",
            "drop batch dimensions (M, num_tokens, batch) from the autotune key, or make every config "
            "agree on the reduction-shaping parameters (BLOCK_K, SPLIT_K, num_warps)",
        ),
        Rule(
            "heuristic_from_batch",
            "autotune",
            "a triton.heuristics rule derives a reduction-shaping parameter from the batch",
            _TILE_GUIDANCE,
        ),
        Rule(
            "batch_value_in_kernel_output",
            "algorithm_selection",
            "a batch-dependent value or the sample's position changes what a kernel computes for it",
            "a sample's values may depend only on its own inputs and per-sample sizes: pass batch sizes "
            "and positions to a kernel for grids, masks and addresses only (e.g. count chunk boundaries "
            "from the start of the sample, not of the packed batch)",
        ),
        Rule(
            "elementwise_value_from_batch",
            "algorithm_selection",
            "the batch chooses a setting of a kernel that computes each element from its own inputs",
            "settled by dynamic validation, which must launch the kernel with two of its settings and "
            "see every tracked sample keep its bits; pass one setting for every batch size to make it "
            "certain (the settings agree only where their formulas round alike, e.g. x * (1/d) and "
            "x / d for a power-of-two d)",
        ),
        Rule(
            "accumulation_order_from_batch",
            "reduction_order",
            "a loop in an order decided by the batch accumulates into the output",
            "add each sample's contributions in an order of its own (e.g. by top-k slot, or into "
            "per-slot buffers summed afterwards), not in an order computed from the whole batch",
        ),
        Rule(
            "sample_order_from_batch",
            "reduction_order",
            "a sample's own entries are sorted by keys computed from the whole batch",
            "keep each sample's entries in an order of its own (the order it came in, or sorted by its "
            "own values), not by their positions in a buffer or pool built from the whole batch: a "
            "reduction over them then sums in an order its batchmates decide",
        ),
        Rule(
            "rng_seed_from_batch",
            "rng",
            "a random seed or offset depends on the batch or the sample's position",
            "seed from the request's own seed, not the row index: per-sample seed/offset loaded from "
            "the sample's own data, offsets counted within the sample",
        ),
        Rule(
            "rng_stream_shared_by_batch",
            "rng",
            "one random stream is drawn for the whole batch",
            "draw each sample's random numbers from its own generator seeded by its own seed "
            "(e.g. philox(seed[i], offset within the sample)), never from one batch-wide stream",
        ),
        Rule(
            "float_atomic_accumulation",
            "atomics",
            "a reduction is accumulated with float atomics",
            "accumulate partial results into a buffer and combine them in a fixed order (or give each "
            "output one program): float atomics add in arrival order, which changes with the batch",
        ),
        Rule(
            "expert_routing_from_batch",
            "expert_routing",
            "a token's expert choice depends on its batchmates or the batch size",
            "route each token from its own router logits only: no capacities, statistics or "
            "tie-breaks computed over the batch",
        ),
        Rule(
            "native_split_count",
            "work_partitioning",
            "native code derives a split count from the batch or the grid",
            SPLIT_GUIDANCE,
        ),
        Rule(
            "native_grid_partitioned_reduction",
            "work_partitioning",
            "native code strides a reduction by the grid size",
            "give each thread block a reduction range fixed by the reduction length; a grid-stride "
            "loop may walk over samples, not over one sample's reduction",
        ),
        Rule(
            "native_float_atomic",
            "atomics",
            "native code accumulates floats with atomicAdd",
            "write per-block partial sums to a buffer and reduce them in a fixed order in a second "
            "pass; floating-point atomicAdd sums in arrival order",
        ),
        Rule(
            "native_batch_dispatch",
            "algorithm_selection",
            "host code chooses a kernel from the batch size",
            "launch the same kernel (same template arguments) for every batch size, or choose it from "
            "per-sample dimensions only",
        ),
        Rule(
            "native_elementwise_dispatch",
            "algorithm_selection",
            "host code chooses between elementwise kernels from the batch size",
            "left to dynamic validation: an element computed by one kernel or the other gets the same "
            "bits only if their formulas are the same; launch one kernel for every batch size to make "
            "it certain",
            severity="unresolved",
        ),
        Rule(
            "native_block_size_from_batch",
            "reduction_order",
            "the thread-block size of a block reduction depends on the batch",
            "fix the block size of kernels that reduce across threads; derive it from the reduction "
            "length only",
        ),
        # What the analyzer cannot decide is left to the dynamic stage.
        Rule(
            "autotune_opaque",
            "autotune",
            "autotuned kernel: the configuration chosen at run time is not visible statically",
            "left to dynamic validation; pin one config (or key only on per-sample dims and keep "
            "reduction-shaping parameters equal across configs) to make it decidable",
            "unresolved",
        ),
        Rule(
            "launch_option_unknown_order",
            "reduction_order",
            "num_warps depends on the batch in a kernel whose reduction order may depend on it",
            "left to dynamic validation; fix num_warps to make it decidable",
            "unresolved",
        ),
        Rule(
            "opaque_dispatch",
            "opaque",
            "code the analyzer cannot follow (dynamic import, exec/eval, computed attribute)",
            "left to dynamic validation; import and call kernels directly to make the flow visible",
            "unresolved",
        ),
        Rule(
            "atomic_add_unknown_dtype",
            "atomics",
            "tl.atomic_add of a loaded value whose dtype is not visible",
            "left to dynamic validation; if the value is a float, accumulate into a buffer and reduce it "
            "in a fixed order instead",
            "unresolved",
        ),
        Rule(
            "torch_scatter_accumulate",
            "atomics",
            "index_add_/scatter_add_ accumulate floats with atomics on CUDA",
            "left to dynamic validation; gather contributions and sum them in a fixed order "
            "(e.g. stack then sum over the top-k axis) to make it deterministic",
            "unresolved",
        ),
        Rule(
            "library_kernel_by_shape",
            "algorithm_selection",
            "library GEMM/attention on a batch-shaped tensor: the library picks its algorithm by shape",
            "cuBLAS, cuDNN and SDPA choose kernels (split-K, tiles, backends) from the number of rows; "
            "multiply one sample's rows at a time or use a kernel with fixed tiles (e.g. the task's "
            "Triton GEMM) so a row is reduced the same way whatever its batchmates",
        ),
        Rule(
            "library_batched_kernel",
            "algorithm_selection",
            "a batched library GEMM/attention whose batch count depends on the batch, or a library "
            "convolution on a batch-shaped input",
            "left to dynamic validation; libraries may pick kernels by the batch count, so use a kernel "
            "with fixed tiles where bitwise invariance matters",
            "unresolved",
        ),
        Rule(
            "exact_reduction_from_batch",
            "work_partitioning",
            "a split count or tile from the batch shapes only exact reductions (max/min, argmax/argmin, "
            "integer sums, bitwise and/or/xor)",
            "left to dynamic validation: no grouping changes such a reduction's bits, but how the partial "
            "results are combined (ties of an argmax resolved to the lowest index, every partial taken) "
            "is checked by running it; a split size fixed by the reduction length makes it decidable",
            "unresolved",
        ),
        Rule(
            "native_split_from_sm_count",
            "work_partitioning",
            "native split count derived from the SM count alone",
            "left to dynamic validation (invariant on one GPU model, not across models); " + SPLIT_GUIDANCE,
            "unresolved",
        ),
    )
}


def rule(rule_id: str) -> Rule:
    return RULES[rule_id]
