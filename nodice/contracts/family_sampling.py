"""Sampling family: one request (its logits row, temperature, top-k, top-p, seed) is one sample.

The draw must use only the request's own seed, with offsets counted within the
request; thresholds must come from the request's own parameters.
"""

from nodice.gate.static.contracts import batch_symbols, contract, protect, reduction_tiles

contract("sampling", family="sampling")

batch_symbols("num_reqs", "num_requests", "num_seqs")
reduction_tiles("BLOCK_V", "BLOCK_SIZE_V", "VOCAB_BLOCK", "BLOCK_N", "block_v")
protect(
    "RNG_SEED",
    aliases=["base_seed", "global_seed", "generator_seed", "step_seed"],
    rng_aliases=["rng_state"],
    mechanism="rng",
)
