"""Global contract: batch symbols and protected parameters shared by every task."""

from nodice.gate.static.contracts import batch_symbols, contract, protect

contract("global", scope="global")

# Names that mean "the number of samples in this batch" wherever they are bound.
batch_symbols(
    "batch",
    "batch_size",
    "bsz",
    "bs",
    "n_batch",
    "num_batch",
    "num_tokens",
    "n_tokens",
    "ntokens",
    "total_tokens",
    "num_seqs",
    "n_seqs",
    "num_sequences",
    "num_reqs",
    "num_requests",
    "num_rows",
    "n_rows",
    "nrows",
)

protect(
    "NUM_SPLITS",
    aliases=[
        "num_splits",
        "n_splits",
        "nsplits",
        "splits",
        "num_split",
        "split_k",
        "splitk",
        "split_k_factor",
        "num_k_splits",
        "k_splits",
        "kv_splits",
        "num_kv_splits",
        "num_partitions",
        "n_partitions",
        "num_chunks_per_row",
        "split_factor",
    ],
    mechanism="work_partitioning",
    guidance=(
        "fix the split size, not the number of splits: derive the split count from the reduction "
        "length alone (e.g. cdiv(K, SPLIT_SIZE) with a constant SPLIT_SIZE), never from the batch "
        "size, the grid or the SM count"
    ),
)

protect(
    "RNG_SEED",
    aliases=["seed", "seeds", "rng_seed", "philox_seed", "philox_offset", "rng_offset", "seed_offset"],
    # Generic names that are protected only where random numbers are drawn.
    rng_aliases=["offset", "offsets", "philox_offsets", "subsequence", "counter"],
    mechanism="rng",
    guidance=(
        "seed from the request's own seed, not the row index: load the sample's seed from its own "
        "data and count offsets within the sample"
    ),
)
