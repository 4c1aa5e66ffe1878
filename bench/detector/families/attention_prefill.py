"""Attention-prefill candidates: a flash-attention forward (and a split-KV variant) under launch policies."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, decorated, invariant, module, violating

T = "attention_prefill"

FLASH_BODY = """
def _flash_forward(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale, seq_len, q_heads, group,
                   CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    m_block = tl.program_id(0)
    seq_head = tl.program_id(1)
    seq = seq_head // q_heads
    kv_head = (seq_head % q_heads) // group
    kv_offset = (seq * (q_heads // group) + kv_head).to(tl.int64) * seq_len * HEAD_DIM
    q_base = seq_head.to(tl.int64) * seq_len * HEAD_DIM
    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(q_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        k = tl.load(k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_offset + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
"""
FLASH = "LOG2E = 1.4426950408889634\n\n\n@triton.jit\n" + FLASH_BODY.lstrip("\n")

LAUNCH = """
def _attention(q, k, v, causal, sm_scale, block_m, block_n):
    batch, q_heads, seq_len, head_dim = q.shape
    o = torch.empty_like(q)
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads)
    _flash_forward[grid](q, k, v, o, sm_scale * LOG2E, seq_len, q_heads, q_heads // k.shape[1],
                         CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n)
    return o


def _tiles(head_dim):
    # Hopper-sized tiles for real heads; one tile spans a short sequence for tiny ones.
    return (128, 64) if head_dim >= 64 else (64, 32)
"""

SPLIT = """
@triton.jit
def _flash_split(q_ptr, k_ptr, v_ptr, acc_ptr, max_ptr, sum_ptr, qk_scale, seq_len, q_heads, group, num_splits, keys_per_split,
                 CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    m_block = tl.program_id(0)
    seq_head = tl.program_id(1)
    split = tl.program_id(2)
    seq = seq_head // q_heads
    kv_head = (seq_head % q_heads) // group
    kv_offset = (seq * (q_heads // group) + kv_head).to(tl.int64) * seq_len * HEAD_DIM
    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(q_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, seq_len)
    if CAUSAL:
        hi = tl.minimum(hi, (m_block + 1) * BLOCK_M)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi
        k = tl.load(k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_offset + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    row = (seq_head * num_splits + split).to(tl.int64) * seq_len + offs_m
    tl.store(acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=row_ok[:, None])
    tl.store(max_ptr + row, m_i, mask=row_ok)
    tl.store(sum_ptr + row, l_i, mask=row_ok)


def _split_attention(q, k, v, causal, sm_scale, num_splits, block_m=64, block_n=16):
    batch, q_heads, seq_len, head_dim = q.shape
    keys_per_split = triton.cdiv(triton.cdiv(seq_len, num_splits), block_n) * block_n
    f32 = dict(dtype=torch.float32, device=q.device)
    part_acc = torch.empty((batch, q_heads, num_splits, seq_len, head_dim), **f32)
    part_max = torch.empty((batch, q_heads, num_splits, seq_len), **f32)
    part_sum = torch.empty((batch, q_heads, num_splits, seq_len), **f32)
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads, num_splits)
    _flash_split[grid](q, k, v, part_acc, part_max, part_sum, sm_scale * LOG2E, seq_len, q_heads, q_heads // k.shape[1],
                       num_splits, keys_per_split, CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n)
    # Rescale every split to the common running max and add them up.
    m_all = part_max.max(dim=2, keepdim=True).values
    weight = torch.exp2(part_max - m_all)
    total = (part_sum * weight).sum(dim=2)
    return ((part_acc * weight.unsqueeze(-1)).sum(dim=2) / total.unsqueeze(-1)).to(q.dtype)
"""

EAGER = """
def _eager_attention(q, k, v, causal, sm_scale):
    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float(), kf.transpose(-1, -2)) * sm_scale
    if causal:
        s = q.shape[2]
        future = torch.ones((s, s), dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vf).to(q.dtype)
"""


def candidates() -> list[Candidate]:
    out: list[Candidate] = []
    V, I = violating, invariant  # noqa: E741

    out.append(
        V(
            "split_kv_small_batch",
            T,
            "work_partitioning",
            "direct",
            "keys split four ways (flash-decoding style) for batches of one or two sequences",
            module(
                "Flash attention; short batches split the keys across programs and merge.",
                FLASH,
                LAUNCH,
                SPLIT,
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                if q.shape[0] <= 2:
                    return _split_attention(q, k, v, causal, sm_scale, num_splits=4)
                return _attention(q, k, v, causal, sm_scale, *_tiles(q.shape[-1]))
            """,
            ),
        )
    )
    out.append(
        V(
            "split_kv_from_programs",
            T,
            "work_partitioning",
            "transitive_grid",
            "split count = 8 // (batch · query blocks), at least 1",
            module(
                "Split-KV flash attention sized to keep eight programs per head busy.",
                FLASH,
                SPLIT,
                """
            PROGRAMS_PER_HEAD = 8

            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                batch, _, seq_len, _ = q.shape
                m_blocks = triton.cdiv(seq_len, 64)
                num_splits = max(1, PROGRAMS_PER_HEAD // (batch * m_blocks))
                return _split_attention(q, k, v, causal, sm_scale, num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "key_tile_from_batch",
            T,
            "reduction_order",
            "direct",
            "narrow key tiles (BLOCK_N 16) for batches under 3: the online softmax rescales at different points",
            module(
                "Flash attention; narrow key tiles for small batches.",
                FLASH,
                LAUNCH,
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                block_m, block_n = _tiles(q.shape[-1])
                if q.shape[0] < 3:
                    block_n = 16
                return _attention(q, k, v, causal, sm_scale, block_m, block_n)
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_on_batch",
            T,
            "autotune",
            "autotune_key_prune",
            "autotune keyed on the batch size; pruning prefers narrow key tiles when the batch is small",
            module(
                "Autotuned flash attention.",
                "LOG2E = 1.4426950408889634",
                """
            def _prune(configs, named_args, **kwargs):
                small = named_args["batch"] <= 2
                return [c for c in configs if (c.kwargs["BLOCK_N"] == 16) == small]
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 16}), triton.Config({"BLOCK_M": 64, "BLOCK_N": 32})],
                key=["batch", "seq_len", "HEAD_DIM"],
                prune_configs_by={"early_config_prune": _prune},
            )
            @triton.jit
            """,
                    FLASH_BODY.replace(
                        "def _flash_forward(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale, seq_len,",
                        "def _flash_forward(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale, batch, seq_len,",
                    ),
                ),
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                batch, q_heads, seq_len, head_dim = q.shape
                o = torch.empty_like(q)
                grid = lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * q_heads)
                _flash_forward[grid](q, k, v, o, sm_scale * LOG2E, batch, seq_len, q_heads, q_heads // k.shape[1], CAUSAL=bool(causal), HEAD_DIM=head_dim)
                return o
            """,
            ),
        )
    )
    out.append(
        V(
            "eager_single_sequence",
            T,
            "algorithm_selection",
            "control_dependent",
            "a single sequence takes an eager PyTorch path (matmul, softmax, matmul)",
            module(
                "Flash attention; a lone sequence runs eagerly (no launch overhead to hide).",
                FLASH,
                LAUNCH,
                EAGER,
                """
            def kernel(q, k, v, causal, sm_scale):
                if q.shape[0] == 1:
                    return _eager_attention(q, k, v, causal, sm_scale)
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                return _attention(q, k, v, causal, sm_scale, *_tiles(q.shape[-1]))
            """,
            ),
        )
    )

    out.append(
        I(
            "fixed_tiles",
            T,
            "batch_in_grid",
            "tiles from the head dim only; the batch sizes the grid",
            module(
                "Flash attention forward, tiles from the head dimension.",
                FLASH,
                LAUNCH,
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                return _attention(q, k, v, causal, sm_scale, *_tiles(q.shape[-1]))
            """,
            ),
        )
    )
    out.append(
        I(
            "query_tile_from_batch",
            T,
            "row_tile",
            "the query tile (not reduced over) shrinks for large batches; the key tile is fixed",
            module(
                "Flash attention; smaller query tiles once the batch fills the grid.",
                FLASH,
                LAUNCH,
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                block_m, block_n = _tiles(q.shape[-1])
                if q.shape[0] >= 4:
                    block_m = block_m // 2
                return _attention(q, k, v, causal, sm_scale, block_m, block_n)
            """,
            ),
        )
    )
    out.append(
        I(
            "loop_over_sequences",
            T,
            "sample_loop",
            "one launch per sequence",
            module(
                "Flash attention launched sequence by sequence.",
                FLASH,
                LAUNCH,
                """
            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                o = torch.empty_like(q)
                for i in range(q.shape[0]):
                    o[i : i + 1] = _attention(q[i : i + 1], k[i : i + 1], v[i : i + 1], causal, sm_scale, *_tiles(q.shape[-1]))
                return o
            """,
            ),
        )
    )
    out.append(
        I(
            "split_kv_fixed",
            T,
            "constant_split",
            "keys always split in two, whatever the batch",
            module(
                "Split-KV flash attention with a fixed two-way split.",
                FLASH,
                SPLIT,
                """
            NUM_SPLITS = 2

            def kernel(q, k, v, causal, sm_scale):
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                return _split_attention(q, k, v, causal, sm_scale, NUM_SPLITS)
            """,
            ),
        )
    )
    return out
