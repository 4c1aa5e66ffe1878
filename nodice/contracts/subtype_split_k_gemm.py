"""Split-K and stream-K GEMM: the K loop of one output tile is shared by several programs."""

from nodice.gate.static.contracts import contract, protect

contract("split_k_gemm", subtype_of="gemm", tasks=["gemm"])

protect(
    "NUM_SPLITS",
    aliases=["split_k", "splitk", "num_k_splits", "k_splits", "stream_k_tiles", "sk_tiles", "sk_blocks"],
    mechanism="work_partitioning",
)
