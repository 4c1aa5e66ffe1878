"""MoE family: one token is one sample.

A token's experts, its routing weights and the order in which expert outputs
are combined must depend on its own router logits only.
"""

from nodice.gate.static.contracts import batch_symbols, contract, protect, reduction_tiles, routing_calls

contract("moe", family="moe")

batch_symbols("num_tokens", "T", "tokens", "n_tok", "total_tokens_post_pad")
reduction_tiles("BLOCK_K", "BLOCK_SIZE_K", "BLOCK_H", "BLOCK_I")
routing_calls("topk", "softmax", "log_softmax", "sigmoid", "argmax", "multinomial")
protect(
    "EXPERT_CAPACITY",
    aliases=[
        "capacity",
        "expert_capacity",
        "capacity_factor",
        "max_tokens_per_expert",
        "tokens_per_expert_cap",
    ],
    mechanism="expert_routing",
    guidance=(
        "route each token from its own router logits only: no capacity limit, token dropping or "
        "load statistics computed over the batch"
    ),
)
protect(
    "ROUTING_BIAS",
    aliases=["routing_bias", "expert_bias", "load_balance_bias", "aux_bias"],
    mechanism="expert_routing",
    guidance="a routing bias must be a fixed model parameter, never a statistic of the current batch",
)
