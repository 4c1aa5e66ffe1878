"""Paged attention decode in one launch: split-KV with fixed split sizes, combined by the last split.

The two-launch design (a split kernel, then a combine with one program per (request, query head);
now ``lab/candidates/attention_decode_two_launch.py``, whose pins came from the
``nodice evolve --device cuda`` lineage in ``lab/results/evolve/attention_decode/``) with the
second launch folded into the first:

- **One kernel.** A program per (split, kv head, request) attends its query heads to one split of
  the request's keys and, when the request has more than one split, writes fp32 partials (the
  unnormalised values, the running max and the mass) for each query head. It then bumps an int32
  arrival counter for its (request, kv head) with an acquire-release atomic at GPU scope (one
  thread issues it, so a CTA barrier first orders every thread's partial stores before that
  release; Triton hands the old count to all threads through shared memory behind another
  barrier, which carries the acquire to the threads that read the partials). The program that
  finds ``n_splits - 1`` there is the last of that request and head to finish: it folds all of
  the request's splits and writes the output of the kv head's query heads, then puts the counter
  back to 0 for the next call. The counters live in a zeroed int32 buffer cached per device
  (``CACHE_COUNTERS``; grown when a call needs more). A request with a single split writes its
  output directly and touches neither partials nor counter.
- **The fold reads memory only**, whichever program arrives last: every split's partials, its
  own included, are read back (``.cg``: from L2, since L1 is not coherent across SMs; each
  (request, kv head)'s maxima and masses are also padded to whole 128-byte lines, so no line
  holds two folds' data) and folded exactly as the two-launch combine folds them: per query head,
  SPLIT_TILE splits at a time, split 0 first (the running max over a tile is exact and
  order-free, the tile's masses and values are summed by ``tl.sum`` over a tile of fixed width
  where masked splits add exact zeros, the tiles are folded first to last). Which program did
  the fold changes nothing in what it computes; with the long rule off and the same pins the
  output is the two-launch kernel's, bit for bit, wherever the compiler lays out the two alike.
- **FOLD_HEADS query heads are folded side by side** (``_fold_group``). The fold is the one
  part of the kernel on the critical path: it starts when the last split lands and nothing else
  of its request runs meanwhile. Folding the GROUP heads one after another (the first version)
  took GROUP × ceil(splits / SPLIT_TILE) dependent steps (a load from L2, then reductions
  across warps), where the two-launch combine spreads the same work over batch × q_heads programs;
  that lost the small batches (b1-kv32k 1784 GB/s against the two-launch 2514). Each step now loads
  a [FOLD_HEADS, SPLIT_TILE] tile of maxima and masses and a [FOLD_HEADS, SPLIT_TILE, D] tile of
  values and reduces over the split axis only, so it takes GROUP / FOLD_HEADS × ceil(splits /
  SPLIT_TILE) steps (llama's group of 4: one pass). Per head the reductions are the ones the
  two-launch combine does (same tile width, same order, every sum over the head's own row), so
  the result does not change; on sm_90 the split axis also keeps the two-launch combine's layout
  (4 warps × 4 registers for the values, 16 lanes for the masses) up to FOLD_HEADS 4. The price
  is registers: the value tile is FOLD_HEADS × SPLIT_TILE × D / (32 × warps) fp32 per thread
  (64 at FOLD_HEADS 4, D 128, 4 warps), and the fold sets the register count of the whole
  kernel: about 150 against 72-96 with one head (sm_90 compile), 3 programs per SM instead of
  the 5 that shared memory allows at BLOCK_N 64 (BLOCK_N 128 is held to 3 by shared memory
  anyway). The partials are split-major per (request, kv head) (values [split, head, D], maxima
  and masses [split, head]): a split writes one contiguous block, and every offset of a fold
  step is a constant off one scalar base.
- **Optionally a longer split for long requests** (``LONG_SPLIT_TOKENS_D128`` for requests longer
  than ``LONG_FROM_TOKENS_D128`` tokens, ``SPLIT_TOKENS_D128`` otherwise; 0 turns the rule off):
  fewer partials, fewer pipeline ramps and a shorter fold per token for long requests, at the
  price of fewer programs when such a request runs alone. The grid is sized for the short split;
  a long request's programs past its last split exit at once.
- **Splits run next to each other**: the grid is (split, kv head, request), split fastest, so a
  request's splits are in flight together, its last arriver folds partials that are still in L2,
  and the folds are spread over the run instead of piling up in the last wave.
- K is gathered as rows ``[BLOCK_N, D]`` and transposed in the dot, as in the two-launch kernel.
  Requests have at least one token.

Measured on the H200 (2026-12-04, two pin sweeps in separate calls, now the knob search; the
whole gate passed on CUDA): at these pins 1.024× and 1.027× FlashInfer's decode with a fixed
split size (its batch-invariant configuration) geomean over the task's 17 workloads, lowest
0.946× and 0.951×, where the two-launch kernel measured 0.995× and 0.993× (lowest 0.902×, 0.905×)
in the same runs. It wins most at small batches (b1-kv8k 1.59×: the combine's launch and its
second pass over the partials were the cost there) and still trails FlashInfer by 2–5 % at large
batches with long requests (b128-kv32k 0.97×; Qwen3-30B-A3B b128-kv32k 0.95×). The long-request
rule (below) measured within noise of off on the long rows and cost up to 8 % at b1-kv32k, so it
is off.

Batch-invariant because everything a request's output depends on is fixed by the request itself
and the head layout: its split size is chosen from its own length (never from the batch size,
the other requests' lengths or the grid), its split boundaries run every split-size tokens from
its first token, the key tiles inside a split, the fold's tile width and order follow the head
layout alone (FOLD_HEADS only changes how many heads share a step, never a head's own sums),
and the page placement only moves addresses. The counter decides *which* program
folds, not *what* is folded or in which order; integer atomics are exact, and no float is ever
accumulated atomically. Programs of other requests touch other counters and other partials.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# Pinned per head dim (never per batch): key tile, split size, warps and pipeline stages.
BLOCK_N_D128 = 128
SPLIT_TOKENS_D128 = 512
NUM_WARPS_D128 = 4
NUM_STAGES_D128 = 3
# Registers per thread at most (Triton's ``maxnreg``; 0: the compiler's choice). The fold sets the
# kernel's count (about 150 at FOLD_HEADS 4), which holds an SM to 3 programs of 4 warps; at 128 or
# fewer, 4 fit where shared memory lets them (BLOCK_N 64). A cap changes the register allocation
# only (spills go to local memory), never an operation or its order: the same bits.
MAX_REGISTERS_D128 = 0
# Requests longer than LONG_FROM_TOKENS_D128 tokens split every LONG_SPLIT_TOKENS_D128 tokens
# (a request's own length only); LONG_SPLIT_TOKENS_D128 = 0 (or not above SPLIT_TOKENS_D128):
# every request splits every SPLIT_TOKENS_D128 tokens.
LONG_SPLIT_TOKENS_D128 = 0
LONG_FROM_TOKENS_D128 = 16384
# Small head dims (the CPU problem): small splits, so that the interpreter's requests of tens of
# tokens have several splits and the long rule applies to some of them.
BLOCK_N_SMALL = 16
SPLIT_TOKENS_SMALL = 16
LONG_SPLIT_TOKENS_SMALL = 32
LONG_FROM_TOKENS_SMALL = 40
# Splits folded per step of the fold (the two-launch combine's tile).
SPLIT_TILE = 16
# Query heads folded side by side by the last arriver: the largest power of two up to FOLD_HEADS
# that divides the group (1: head by head). Changes registers and steps, never the result.
FOLD_HEADS = 4
# Load a split's page numbers once before its key walk (1) instead of tile by tile (0). The same
# keys and values in the same order: the same bits; only the loads' schedule changes.
PAGES_AHEAD = 0
# Rows of partial maxima and masses start on a 128-byte line (32 floats).
ML_ALIGN = 32
# Keep the arrival counters between calls (the last arriver puts each back to 0); False: a
# zeroed buffer per call.
CACHE_COUNTERS = True

# The knobs `nodice evolve attention_decode --agent knobs` may set (docs/search.md): warps, pipeline
# depth and the heads folded at once, which change registers and steps, never the result (checked
# bit for bit against the best version before timing).
KNOBS = {
    "NUM_WARPS_D128": (2, 4, 8),
    "NUM_STAGES_D128": (2, 3, 4, 5),
    "FOLD_HEADS": (1, 2, 4, 8),
    "MAX_REGISTERS_D128": (0, 96, 128),
    "PAGES_AHEAD": (0, 1),
}
# The key tile, the split sizes (the long-request rule's too; 0 turns it off) and the fold's tile
# change the order of the online softmax and of the fold: a setting that moves one is a new kernel,
# judged by the whole gate and timed, not compared bit for bit.
ORDER_KNOBS = {
    "BLOCK_N_D128": (32, 64, 128),
    "SPLIT_TOKENS_D128": (256, 512, 1024),
    "LONG_SPLIT_TOKENS_D128": (0, 1024, 2048),
    "LONG_FROM_TOKENS_D128": (8192, 16384),
    "SPLIT_TILE": (8, 16, 32),
}
# The long-request rule's threshold is read only while the rule is on.
KNOB_WHEN = {"LONG_FROM_TOKENS_D128": {"LONG_SPLIT_TOKENS_D128": (1024, 2048)}}

_COUNTERS: dict[torch.device, torch.Tensor] = {}
# Buffers replaced by a larger one stay allocated: a CUDA graph captured with one keeps its address.
_RETIRED: list[torch.Tensor] = []


@triton.jit
def _fold_group(
    acc_ptr,
    max_ptr,
    sum_ptr,
    o_ptr,
    n_splits,
    GROUP: tl.constexpr,
    FOLD_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    SPLIT_TILE: tl.constexpr,
):
    """The outputs of one kv head's GROUP query heads from their ``n_splits`` partials, FOLD_HEADS
    heads at once (FOLD_HEADS divides GROUP): per step a [FOLD_HEADS, SPLIT_TILE] tile of maxima
    and masses and a [FOLD_HEADS, SPLIT_TILE, HEAD_DIM] tile of values, split 0 first. Per head
    this is the two-launch combine's fold (same tile width, same order; every reduction runs over
    the split axis of the head's own row). The partials are split-major ([split, head, D] and
    [split, head]), so every offset in a step is a constant off one scalar base. The loads
    bypass L1 (``.cg``): other SMs wrote them."""
    offs_h = tl.arange(0, FOLD_HEADS)
    offs_s = tl.arange(0, SPLIT_TILE)
    offs_d = tl.arange(0, HEAD_DIM)
    for h0 in range(0, GROUP, FOLD_HEADS):
        heads = h0 + offs_h
        m_all = tl.full([FOLD_HEADS], float("-inf"), dtype=tl.float32)
        l_all = tl.zeros([FOLD_HEADS], dtype=tl.float32)
        acc = tl.zeros([FOLD_HEADS, HEAD_DIM], dtype=tl.float32)
        # Tiles of SPLIT_TILE splits, first to last; a tile's masked splits add exact zeros.
        for s0 in range(0, n_splits, SPLIT_TILE):
            splits = s0 + offs_s
            s_ok = splits < n_splits
            ml = splits[None, :] * GROUP + heads[:, None]
            m_s = tl.load(max_ptr + ml, mask=s_ok[None, :], other=float("-inf"), cache_modifier=".cg")
            l_s = tl.load(sum_ptr + ml, mask=s_ok[None, :], other=0.0, cache_modifier=".cg")
            a_s = tl.load(
                acc_ptr + ml[:, :, None] * HEAD_DIM + offs_d[None, None, :],
                mask=s_ok[None, :, None],
                other=0.0,
                cache_modifier=".cg",
            )
            m_new = tl.maximum(m_all, tl.max(m_s, axis=1))
            alpha = tl.exp2(m_all - m_new)
            beta = tl.where(s_ok[None, :], tl.exp2(m_s - m_new[:, None]), 0.0)
            l_all = l_all * alpha + tl.sum(l_s * beta, axis=1)
            acc = acc * alpha[:, None] + tl.sum(a_s * beta[:, :, None], axis=1)
            m_all = m_new
        out = acc / l_all[:, None]
        tl.store(o_ptr + heads[:, None] * HEAD_DIM + offs_d[None, :], out.to(o_ptr.dtype.element_ty))


@triton.jit
def _decode_fused(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    count_ptr,
    o_ptr,
    qk_scale,
    table_width,
    max_splits,
    ml_stride,
    q_heads,
    kv_heads,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    FOLD_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
    LONG_SPLIT_TOKENS: tl.constexpr,
    LONG_FROM_TOKENS: tl.constexpr,
    SPLIT_TILE: tl.constexpr,
    SPLIT_PAGES: tl.constexpr,
):
    split = tl.program_id(0)
    kv_head = tl.program_id(1)
    req = tl.program_id(2)
    seq_len = tl.load(lens_ptr + req)
    # The request's split size, from its own length only.
    split_len = SPLIT_TOKENS
    if LONG_SPLIT_TOKENS > SPLIT_TOKENS:
        split_len = tl.where(seq_len > LONG_FROM_TOKENS, LONG_SPLIT_TOKENS, SPLIT_TOKENS)
    n_splits = (seq_len + split_len - 1) // split_len
    if split < n_splits:
        offs_g = tl.arange(0, GROUP_PAD)
        offs_d = tl.arange(0, HEAD_DIM)
        offs_n = tl.arange(0, BLOCK_N)
        # The query heads of one kv head, padded to 16 rows so Q·Kᵀ is a tl.dot.
        g_ok = offs_g < GROUP
        heads = kv_head * GROUP + offs_g
        q = tl.load(
            q_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :],
            mask=g_ok[:, None],
            other=0.0,
        )
        m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
        acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
        start = split * split_len
        end = tl.minimum(start + split_len, seq_len)
        if SPLIT_PAGES > 0:
            # The split's page numbers, loaded once: the loop's key and value loads then hang off
            # registers (a gather), not off a load of the same iteration, so the pipeliner gives
            # them every stage (a page load in the loop takes one of them: single-buffered tiles).
            first_page = start // PAGE
            offs_p = tl.arange(0, SPLIT_PAGES)
            split_pages = tl.load(
                table_ptr + req * table_width + first_page + offs_p,
                mask=first_page + offs_p < table_width,
                other=0,
            )
        for tok0 in range(start, end, BLOCK_N):
            toks = tok0 + offs_n
            t_ok = toks < end
            if SPLIT_PAGES > 0:
                local = tl.minimum(toks // PAGE - first_page, SPLIT_PAGES - 1)
                page = tl.where(t_ok, tl.gather(split_pages, local, axis=0), 0)
            else:
                page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
            # Row of the token in the pool viewed as [P*page, Hkv, D].
            row = (page.to(tl.int64) * PAGE + toks % PAGE) * kv_heads + kv_head
            k = tl.load(k_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k)) * qk_scale
            qk = tl.where(t_ok[None, :], qk, float("-inf"))
            # The first tile holds at least one real token, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(qk, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        if n_splits == 1:
            out = acc / l_i[:, None]
            tl.store(
                o_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :],
                out.to(o_ptr.dtype.element_ty),
                mask=g_ok[:, None],
            )
        else:
            # Split-major partials: this split's GROUP rows of values and its GROUP maxima and
            # masses are contiguous.
            fold = req * kv_heads + kv_head
            part = (fold * max_splits + split) * GROUP + offs_g
            tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_ok[:, None])
            part_ml = fold * ml_stride + split * GROUP + offs_g
            tl.store(part_max_ptr + part_ml, m_i, mask=g_ok)
            tl.store(part_sum_ptr + part_ml, l_i, mask=g_ok)
            # Every thread's stores come before the one thread's release below.
            tl.debug_barrier()
            counter = count_ptr + fold
            arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if arrived == n_splits - 1:
                # The last split of this (request, kv head): fold all its splits, FOLD_HEADS
                # heads per pass.
                _fold_group(
                    part_acc_ptr + fold * max_splits * GROUP * HEAD_DIM,
                    part_max_ptr + fold * ml_stride,
                    part_sum_ptr + fold * ml_stride,
                    o_ptr + (req * q_heads + kv_head * GROUP) * HEAD_DIM,
                    n_splits,
                    GROUP,
                    FOLD_HEADS,
                    HEAD_DIM,
                    SPLIT_TILE,
                )
                # Every split of this (request, kv head) has arrived: ready for the next call.
                tl.store(counter, 0)


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """A zeroed int32 arrival counter per (request, kv head), at least ``n`` of them."""
    if not CACHE_COUNTERS:
        return torch.zeros(n, dtype=torch.int32, device=device)
    buf = _COUNTERS.get(device)
    if buf is None or buf.numel() < n:
        size = max(n, 2 * buf.numel()) if buf is not None else max(n, 4096)
        if buf is not None:
            _RETIRED.append(buf)
        buf = torch.zeros(size, dtype=torch.int32, device=device)
        _COUNTERS[device] = buf
    return buf


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch, q_heads, head_dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    group_pad = max(16, triton.next_power_of_2(group))
    # Every pin follows the head dim alone, never the batch (the split size also the request's length).
    launch: dict[str, int] = {}
    if head_dim >= 128:
        block_n, split_tokens = BLOCK_N_D128, SPLIT_TOKENS_D128
        long_split, long_from = LONG_SPLIT_TOKENS_D128, LONG_FROM_TOKENS_D128
        num_warps, num_stages = NUM_WARPS_D128, NUM_STAGES_D128
        if MAX_REGISTERS_D128:
            launch["maxnreg"] = MAX_REGISTERS_D128
    else:
        block_n, split_tokens = BLOCK_N_SMALL, SPLIT_TOKENS_SMALL
        long_split, long_from = LONG_SPLIT_TOKENS_SMALL, LONG_FROM_TOKENS_SMALL
        num_warps, num_stages = 4, 2
    long_split = max(long_split, split_tokens)
    # Page numbers a split spans at most (a power of two for tl.arange), or 0: looked up tile by tile.
    aligned = split_tokens % page == 0 and long_split % page == 0
    spanned = triton.cdiv(long_split, page) + (0 if aligned else 1)
    split_pages = triton.next_power_of_2(spanned) if PAGES_AHEAD else 0
    # Heads folded at once: the largest power of two up to FOLD_HEADS that divides the group.
    fold_heads = 1
    while fold_heads * 2 <= FOLD_HEADS and group % (fold_heads * 2) == 0:
        fold_heads *= 2
    table_width = block_table.shape[1]
    # Enough programs for the widest block table at the short split; the rest exit at once.
    max_splits = triton.cdiv(table_width * page, split_tokens)
    device = q.device
    block_table = block_table.contiguous()
    seq_lens = seq_lens.contiguous()
    # Split-major partials per (request, kv head): values [split, head, D]; maxima and masses
    # [split, head], each (request, kv head)'s row padded to whole 128-byte lines.
    part_acc = torch.empty((batch, kv_heads, max_splits, group, head_dim), dtype=torch.float32, device=device)
    ml_stride = triton.cdiv(max_splits * group, ML_ALIGN) * ML_ALIGN
    part_max = torch.empty((batch, kv_heads, ml_stride), dtype=torch.float32, device=device)
    part_sum = torch.empty((batch, kv_heads, ml_stride), dtype=torch.float32, device=device)
    counters = _counters(device, batch * kv_heads)
    o = torch.empty_like(q)
    _decode_fused[(max_splits, kv_heads, batch)](
        q.contiguous(),
        k_cache.contiguous(),
        v_cache.contiguous(),
        block_table,
        seq_lens,
        part_acc,
        part_max,
        part_sum,
        counters,
        o,
        sm_scale * LOG2E,
        table_width,
        max_splits,
        ml_stride,
        q_heads,
        kv_heads,
        GROUP=group,
        GROUP_PAD=group_pad,
        FOLD_HEADS=fold_heads,
        HEAD_DIM=head_dim,
        PAGE=page,
        BLOCK_N=block_n,
        SPLIT_TOKENS=split_tokens,
        LONG_SPLIT_TOKENS=long_split,
        LONG_FROM_TOKENS=long_from,
        SPLIT_TILE=SPLIT_TILE,
        SPLIT_PAGES=split_pages,
        num_warps=num_warps,
        num_stages=num_stages,
        **launch,
    )
    return o
