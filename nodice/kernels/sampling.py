"""Sampling: exact top-k by a radix select, top-p by rejection, the passes split over the vocabulary.

``tokens[b]`` is drawn from softmax(logits[b] / temperature[b]) restricted to the top_k[b] largest
logits (ties kept; 0 = all), then to the smallest prefix of those, by descending probability, whose
renormalised mass reaches top_p[b]; temperature 0 is the first argmax. The rules: the exact top-k
boundary is the k-th largest order-preserving uint32 key (four 8-bit radix rounds of integer
histograms); top-p is decided by rejection (a draw is kept when the mass strictly above it is
below top_p of the candidates' mass; otherwise everything at or below it is dropped and the
request draws again with the next uniform ``tl.rand(seed, round)``; after ``MAX_DRAWS`` rounds the
boundary is bisected on the key); each draw is an inverse-CDF walk in vocabulary order. Each
accepted draw is, conditionally, a draw from the exact filtered distribution.

Where a request's passes run: the previous version (``lab/candidates/
sampling_per_request.py``, the same rules and random stream) gave each request one program, so
at B ≤ 64 every pass over its 0.5 MB row was one SM's latency (0.51 ms for a top-k request at
V = 128K, 2.8× FlashInfer's time). Here each row is cut into C = cdiv(V, CHUNK) chunks (CHUNK
from V alone) and every full pass is a (request, chunk) grid:

- ``_first``: per chunk max, first argmax, and the count histogram of the keys' top 8-bit digit;
- ``_k_round`` × 3: each program folds the previous round's C histograms in a fixed order
  (integers: exact), picks the digit, histograms the next digit inside the new bracket;
- ``_k_last``: the last pick gives the k-th key (the candidates' floor ``lo``); the row max from
  the chunk maxima (order-free); each chunk's candidate mass and its last candidate;
- ``_draw0`` (one program per request): u = rand(seed, 0), the chunk whose running mass passes
  u·mass (an exclusive scan over C chunk masses), the walk inside that chunk alone;
- ``_above0``: per chunk, the mass strictly above the drawn token (top-p requests only);
- ``_finish`` (one program per request): the top-p test on the C partial masses, folded in a
  fixed order. A rejected request (about one in ten at top_p = 0.9) continues with the previous
  version's loop from round 1: whole-row draws and tests in its own program until it is accepted,
  bisection after ``MAX_DRAWS`` rounds.

Why it is batch-invariant: every program reads one request's row and parameters; the chunking,
the fold orders and the tile shapes follow from V alone; the uniforms come from the request's
seed and the round number only; integer histograms and fixed-order float sums, no atomics. A
request's rounds are the same whatever its batchmates need: programs of requests that are done
(or greedy, or without top-k or top-p) skip their work, and a program holding several requests
(small vocabularies only) stops changing a request once it is done.

Measured on the H200 (2026-12-04, torch 2.11, Triton 3.6; the whole gate passed on CUDA; the
report ``bench/results/kernels_h200.json``): 0.084–0.69 ms over the benchmark's eight workloads,
1.04–2.11× FlashInfer's top-k/top-p sampling (which is not batch-invariant) and 6.9–67× torch's
per-request multinomial at every batch. ``SPLIT_WARPS`` is the lineage's pin
(``lab/results/evolve/sampling/``): against 4 warps it is faster at 64 and 256 requests and
slower at 1 and 8, lifting the lowest ratio to FlashInfer from 1.00× to 1.04×.
"""

import torch
import triton
import triton.language as tl

BINS = 256
# Chunks of the split passes: at most MAX_CHUNK logits, at least MIN_CHUNKS per row (small
# vocabularies, the CPU problem, still get several), TILE logits per step, rows packed per
# program up to TILE_ELEMENTS while chunks are shorter than MAX_CHUNK (small vocabularies, where
# the interpreter pays per operation; from V = 8·MAX_CHUNK on, one row per program).
MAX_CHUNK = 4096
MIN_CHUNKS = 8
MAX_TILE = 1024
TILE_ELEMENTS = 16384
MAX_ROWS = 128
SPLIT_WARPS = 2  # the lineage's v1 (4 before; see the docstring)
# The per-request programs (the first draw, the test, the rejection loop).
LOOP_ELEMENTS = 32768
MAX_BLOCK_V = 8192
LOOP_WARPS = 16
DRAW_WARPS = 8  # the first draw's program per request
MAX_DRAWS = 8
BIG = 2**31 - 1
LOG2E = 1.4426950408889634

# The knobs `nodice evolve sampling --agent knobs` may set (docs/search.md): warps of the split
# passes, the first draw and the per-request loop, and how many short rows share a program; each
# setting's tokens are checked against the best version's before timing. The chunk and tile
# lengths set the order of the chunk masses' sums (a top-p request's test): order knobs, judged by
# the whole gate and timed, not compared bit for bit.
KNOBS = {
    "SPLIT_WARPS": (1, 2, 4, 8),
    "DRAW_WARPS": (4, 8, 16),
    "LOOP_WARPS": (4, 8, 16, 32),
    "TILE_ELEMENTS": (8192, 16384, 32768),
}
ORDER_KNOBS = {
    "MAX_CHUNK": (2048, 4096, 8192),
    "MAX_TILE": (512, 1024, 2048),
}


@triton.jit
def _ukey(x):
    # Monotone float32 -> uint32 map: negative numbers' magnitude bits flipped, then the sign bit.
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return key.to(tl.uint32, bitcast=True) ^ 0x80000000


@triton.jit
def _row_params(temp, k, top_p, vocab, LOG2E: tl.constexpr):
    # Helpers get loaded values, never row-offset pointers.
    greedy = temp <= 0.0
    scale = LOG2E / tl.where(greedy, 1.0, temp)
    k = tl.where((k <= 0) | (k > vocab), vocab, k)
    do_k = ~greedy & (k < vocab)
    do_p = ~greedy & (top_p < 1.0)
    return greedy, scale, k, do_k, do_p


@triton.jit
def _in_bracket(ukey, pre, SHIFT: tl.constexpr):
    # Keys whose digits above SHIFT equal the row's bracket prefix (all keys when nothing is known).
    if SHIFT + 8 >= 32:
        return ukey == ukey
    else:
        return (ukey >> (SHIFT + 8)) == (pre[:, None] >> (SHIFT + 8))


@triton.jit
def _pick(h, above, target, BINS: tl.constexpr):
    """Per row: the largest digit d ≥ 1 whose count (above + hist[d:]) reaches target, else 0 (the
    bracket's floor, known to reach it). h: [ROWS, C_PAD, BINS] chunk histograms (padding zero),
    folded over the chunks by one fixed-shape sum. Returns the digit and the count above it."""
    d = tl.arange(0, BINS)[None, :]
    h = tl.sum(h, axis=1)
    s = tl.cumsum(h, axis=1, reverse=True)
    ok = ((above[:, None] + s) >= target[:, None]) & (d >= 1)
    digit = tl.max(tl.where(ok, d, 0), axis=1)
    s_next = tl.sum(tl.where(d == digit[:, None] + 1, s, 0), axis=1)
    return digit, above + s_next


@triton.jit
def _count_tile(digit, sel, ROWS: tl.constexpr, TILE: tl.constexpr, BINS: tl.constexpr):
    # Per-row integer histograms [ROWS, BINS] of a [ROWS, TILE] tile (row r's bins at r·BINS).
    r = tl.arange(0, ROWS)[:, None]
    flat = tl.reshape(digit + r * BINS, [ROWS * TILE])
    h = tl.histogram(flat, ROWS * BINS, mask=tl.reshape(sel, [ROWS * TILE]))
    return tl.reshape(h, [ROWS, BINS])


@triton.jit(do_not_specialize=["n_rows"])
def _first(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    cmax_ptr,
    carg_ptr,
    hist_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
    BINS: tl.constexpr,
    LOG2E: tl.constexpr,
    BIG: tl.constexpr,
):
    """Per chunk: max, first argmax, count histogram of the top key digit (rows with top-k)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    _greedy, _scale, _k, do_k, _do_p = _row_params(
        tl.load(temp_ptr + rows, mask=row_ok, other=0.0),
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
        LOG2E,
    )
    do_k = row_ok & do_k
    any_k = tl.max(do_k.to(tl.int32), axis=0) > 0
    base = rows.to(tl.int64)[:, None] * vocab
    best = tl.full([ROWS], float("-inf"), tl.float32)
    arg = tl.full([ROWS], 0, tl.int32)
    h = tl.zeros([ROWS, BINS], tl.int32)
    for t in range(0, CHUNK, TILE):
        cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
        ok = row_ok[:, None] & (cols < vocab)
        x = tl.load(logits_ptr + base + cols, mask=ok, other=float("-inf"))
        m = tl.max(x, axis=1)
        a = tl.min(tl.where(x == m[:, None], cols, BIG), axis=1)
        arg = tl.where(m > best, a, arg)
        best = tl.maximum(best, m)
        if any_k:
            digit = (_ukey(x) >> 24).to(tl.int32)
            h += _count_tile(digit, ok & do_k[:, None], ROWS, TILE, BINS)
    tl.store(cmax_ptr + rows * C + cid, best, mask=row_ok)
    tl.store(carg_ptr + rows * C + cid, arg, mask=row_ok)
    if any_k:
        hp = hist_ptr + (rows * C + cid).to(tl.int64)[:, None] * BINS + tl.arange(0, BINS)[None, :]
        tl.store(hp, h, mask=do_k[:, None])


@triton.jit(do_not_specialize=["n_rows"])
def _k_round(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    pre_ptr,
    above_ptr,
    hist_in_ptr,
    hist_out_ptr,
    n_rows,
    vocab,
    C,
    ROUND: tl.constexpr,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
    BINS: tl.constexpr,
    LOG2E: tl.constexpr,
):
    """Pick top-k digit ROUND-1 (of 4), then histogram digit ROUND inside the new bracket."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0  # chunk 0 records the row's picks
    _greedy, _scale, k, do_k, _do_p = _row_params(
        tl.load(temp_ptr + rows, mask=row_ok, other=0.0),
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
        LOG2E,
    )
    live = row_ok & do_k
    if tl.max(live.to(tl.int32), axis=0) > 0:
        c3 = tl.arange(0, C_PAD)[None, :, None]
        hoffs = (rows[:, None, None] * C + c3).to(tl.int64) * BINS + tl.arange(0, BINS)[None, None, :]
        h = tl.load(hist_in_ptr + hoffs, mask=live[:, None, None] & (c3 < C), other=0)
        if ROUND == 1:
            pre = tl.full([ROWS], 0, tl.uint32)
            above = tl.full([ROWS], 0, tl.int32)
        else:
            pre = tl.load(pre_ptr + (ROUND - 1) * n_rows + rows, mask=live, other=0).to(
                tl.uint32, bitcast=True
            )
            above = tl.load(above_ptr + (ROUND - 1) * n_rows + rows, mask=live, other=0)
        digit, above = _pick(h, above, k, BINS)
        pre = pre | (digit.to(tl.uint32) << (32 - 8 * ROUND))
        tl.store(pre_ptr + ROUND * n_rows + rows, pre.to(tl.int32, bitcast=True), mask=live & lead)
        tl.store(above_ptr + ROUND * n_rows + rows, above, mask=live & lead)
        base = rows.to(tl.int64)[:, None] * vocab
        hk = tl.zeros([ROWS, BINS], tl.int32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = live[:, None] & (cols < vocab)
            ukey = _ukey(tl.load(logits_ptr + base + cols, mask=ok, other=0.0))
            sel = ok & _in_bracket(ukey, pre, 24 - 8 * ROUND)
            dg = ((ukey >> (24 - 8 * ROUND)) & 255).to(tl.int32)
            hk += _count_tile(dg, sel, ROWS, TILE, BINS)
        hp = hist_out_ptr + (rows * C + cid).to(tl.int64)[:, None] * BINS + tl.arange(0, BINS)[None, :]
        tl.store(hp, hk, mask=live[:, None])


@triton.jit(do_not_specialize=["n_rows"])
def _k_last(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    cmax_ptr,
    pre_ptr,
    above_ptr,
    hist_in_ptr,
    lo_ptr,
    rmax_ptr,
    cmass_ptr,
    clast_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
    BINS: tl.constexpr,
    LOG2E: tl.constexpr,
):
    """The last top-k pick (the candidates are keys ≥ lo; lo = 0 without top-k), the row max, and
    this chunk's candidate mass and last candidate (sampled rows)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0
    greedy, scale, k, do_k, _do_p = _row_params(
        tl.load(temp_ptr + rows, mask=row_ok, other=0.0),
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
        LOG2E,
    )
    sampled = row_ok & ~greedy
    if tl.max(sampled.to(tl.int32), axis=0) > 0:
        c = tl.arange(0, C_PAD)[None, :]
        cm = tl.load(cmax_ptr + rows[:, None] * C + c, mask=sampled[:, None] & (c < C), other=float("-inf"))
        row_max = tl.where(sampled, tl.max(cm, axis=1), 0.0)
        lo = tl.full([ROWS], 0, tl.uint32)
        live = sampled & do_k
        if tl.max(live.to(tl.int32), axis=0) > 0:
            c3 = tl.arange(0, C_PAD)[None, :, None]
            hoffs = (rows[:, None, None] * C + c3).to(tl.int64) * BINS + tl.arange(0, BINS)[None, None, :]
            h = tl.load(hist_in_ptr + hoffs, mask=live[:, None, None] & (c3 < C), other=0)
            pre = tl.load(pre_ptr + 3 * n_rows + rows, mask=live, other=0).to(tl.uint32, bitcast=True)
            above = tl.load(above_ptr + 3 * n_rows + rows, mask=live, other=0)
            digit, _above = _pick(h, above, k, BINS)
            lo = tl.where(live, pre | digit.to(tl.uint32), lo)
        tl.store(lo_ptr + rows, lo.to(tl.int32, bitcast=True), mask=sampled & lead)
        tl.store(rmax_ptr + rows, row_max, mask=sampled & lead)
        base = rows.to(tl.int64)[:, None] * vocab
        mass = tl.zeros([ROWS], tl.float32)
        last = tl.full([ROWS], -1, tl.int32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = sampled[:, None] & (cols < vocab)
            x = tl.load(logits_ptr + base + cols, mask=ok, other=float("-inf"))
            w = tl.exp2((x - row_max[:, None]) * scale[:, None])
            kept = ok & (_ukey(x) >= lo[:, None]) & (w > 0.0)
            mass += tl.sum(tl.where(kept, w, 0.0), axis=1)
            last = tl.maximum(last, tl.max(tl.where(kept, cols, -1), axis=1))
        tl.store(cmass_ptr + rows * C + cid, mass, mask=sampled)
        tl.store(clast_ptr + rows * C + cid, last, mask=sampled)


@triton.jit(do_not_specialize=["n_rows"])
def _draw0(
    logits_ptr,
    temp_ptr,
    seed_ptr,
    cmax_ptr,
    carg_ptr,
    rmax_ptr,
    lo_ptr,
    cmass_ptr,
    clast_ptr,
    mass_ptr,
    piv_ptr,
    out_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
    LOG2E: tl.constexpr,
    BIG: tl.constexpr,
):
    """Greedy rows: the first argmax. Sampled rows: round 0's draw, walking one chunk only."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    greedy = temp <= 0.0
    sampled = row_ok & ~greedy
    scale = LOG2E / tl.where(greedy, 1.0, temp)
    c = tl.arange(0, C_PAD)[None, :]
    cok = row_ok[:, None] & (c < C)
    # Greedy: the first chunk holding the row max, its first argmax.
    cmax = tl.load(cmax_ptr + rows[:, None] * C + c, mask=cok, other=float("-inf"))
    first = tl.min(tl.where(cmax == tl.max(cmax, axis=1)[:, None], c, C_PAD), axis=1)
    token = tl.load(carg_ptr + rows * C + first, mask=row_ok & greedy, other=0)
    if tl.max(sampled.to(tl.int32), axis=0) > 0:
        seed = tl.load(seed_ptr + rows, mask=sampled, other=0)
        u = tl.rand(seed, tl.full([ROWS], 0, tl.int32))
        scok = sampled[:, None] & (c < C)
        m = tl.load(cmass_ptr + rows[:, None] * C + c, mask=scok, other=0.0)
        last = tl.load(clast_ptr + rows[:, None] * C + c, mask=scok, other=-1)
        incl = tl.cumsum(m, axis=1)
        total = tl.sum(tl.where(c == C - 1, incl, 0.0), axis=1)
        threshold = u * total
        star = tl.min(tl.where(scok & (incl > threshold[:, None]), c, C_PAD), axis=1)
        # Rounding can leave the chunks a hair short of u·mass: then the last candidate.
        fallback = tl.max(last, axis=1)
        fallback = tl.where(fallback < 0, 0, fallback)
        found = sampled & (star < C_PAD)
        excl = tl.sum(tl.where(c == star[:, None] - 1, incl, 0.0), axis=1)
        row_max = tl.load(rmax_ptr + rows, mask=sampled, other=0.0)
        lo = tl.load(lo_ptr + rows, mask=sampled, other=0).to(tl.uint32, bitcast=True)
        cols = star[:, None] * CHUNK + tl.arange(0, CHUNK)[None, :]
        ok = found[:, None] & (cols < vocab)
        x = tl.load(logits_ptr + rows.to(tl.int64)[:, None] * vocab + cols, mask=ok, other=float("-inf"))
        w = tl.exp2((x - row_max[:, None]) * scale[:, None])
        kept = ok & (_ukey(x) >= lo[:, None]) & (w > 0.0)
        running = excl[:, None] + tl.cumsum(tl.where(kept, w, 0.0), axis=1)
        hit = tl.min(tl.where(kept & (running > threshold[:, None]), cols, BIG), axis=1)
        chunk_last = tl.sum(tl.where(c == star[:, None], last, 0), axis=1)
        walked = tl.where(hit == BIG, chunk_last, hit)
        drawn = tl.where(found, walked, fallback)
        x_t = tl.load(logits_ptr + rows.to(tl.int64) * vocab + drawn, mask=sampled, other=0.0)
        tl.store(piv_ptr + rows, _ukey(x_t).to(tl.int32, bitcast=True), mask=sampled)
        tl.store(mass_ptr + rows, total, mask=sampled)
        token = tl.where(sampled, drawn, token)
    tl.store(out_ptr + rows, token.to(tl.int64), mask=row_ok)


@triton.jit(do_not_specialize=["n_rows"])
def _above0(
    logits_ptr,
    temp_ptr,
    top_p_ptr,
    rmax_ptr,
    piv_ptr,
    cabove_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
    LOG2E: tl.constexpr,
):
    """Top-p rows: this chunk's mass strictly above round 0's drawn key."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    top_p = tl.load(top_p_ptr + rows, mask=row_ok, other=1.0)
    testing = row_ok & (temp > 0.0) & (top_p < 1.0)
    if tl.max(testing.to(tl.int32), axis=0) > 0:
        scale = LOG2E / tl.where(testing, temp, 1.0)
        row_max = tl.load(rmax_ptr + rows, mask=testing, other=0.0)
        piv = tl.load(piv_ptr + rows, mask=testing, other=0).to(tl.uint32, bitcast=True)
        base = rows.to(tl.int64)[:, None] * vocab
        mass = tl.zeros([ROWS], tl.float32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = testing[:, None] & (cols < vocab)
            x = tl.load(logits_ptr + base + cols, mask=ok, other=float("-inf"))
            w = tl.exp2((x - row_max[:, None]) * scale[:, None])
            mass += tl.sum(tl.where(ok & (_ukey(x) > piv[:, None]), w, 0.0), axis=1)
        tl.store(cabove_ptr + rows * C + cid, mass, mask=testing)


@triton.jit
def _draw(logits_ptr, base, row_ok, vocab, row_max, scale, lo, thr, BLOCK_V: tl.constexpr, BIG: tl.constexpr):
    """The first token (vocabulary order) whose running mass over keys ≥ lo passes thr; the last
    such token with weight where rounding leaves the walk short. Stops at the chunk that holds it."""
    cols0 = tl.arange(0, BLOCK_V)
    token = tl.full(thr.shape, BIG, tl.int32)
    last = tl.full(thr.shape, 0, tl.int32)
    carry = tl.zeros(thr.shape, tl.float32)
    todo = row_ok
    start = 0
    while (start < vocab) & (tl.max(todo.to(tl.int32), axis=0) > 0):
        cols = start + cols0
        ok = row_ok[:, None] & (cols[None, :] < vocab)
        x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
        w = tl.exp2((x - row_max[:, None]) * scale[:, None])
        kept = ok & (_ukey(x) >= lo[:, None]) & (w > 0.0)
        w = tl.where(kept, w, 0.0)
        running = carry[:, None] + tl.cumsum(w, axis=1)
        hit = kept & (running > thr[:, None])
        token = tl.minimum(token, tl.min(tl.where(hit, cols[None, :], BIG), axis=1))
        last = tl.maximum(last, tl.max(tl.where(kept, cols[None, :], 0), axis=1))
        carry += tl.sum(w, axis=1)
        todo = todo & (token == BIG)
        start += BLOCK_V
    return tl.where(token == BIG, last, token)


@triton.jit
def _mass_above(logits_ptr, base, row_ok, vocab, row_max, scale, piv, BLOCK_V: tl.constexpr):
    # Mass of the keys strictly above piv, summed chunk by chunk in vocabulary order.
    cols0 = tl.arange(0, BLOCK_V)
    mass = tl.zeros(row_max.shape, tl.float32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + cols0
        ok = row_ok[:, None] & (cols[None, :] < vocab)
        x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
        w = tl.exp2((x - row_max[:, None]) * scale[:, None])
        mass += tl.sum(tl.where(ok & (_ukey(x) > piv[:, None]), w, 0.0), axis=1)
    return mass


@triton.jit(do_not_specialize=["n_rows"])
def _finish(
    logits_ptr,
    temp_ptr,
    top_p_ptr,
    seed_ptr,
    rmax_ptr,
    lo_ptr,
    mass_ptr,
    piv_ptr,
    cabove_ptr,
    out_ptr,
    n_rows,
    vocab,
    C,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
    BLOCK_V: tl.constexpr,
    MAX_DRAWS: tl.constexpr,
    BIG: tl.constexpr,
    LOG2E: tl.constexpr,
):
    """Round 0's top-p test; rejected rows go on drawing from their own row (the bundled loop)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    top_p = tl.load(top_p_ptr + rows, mask=row_ok, other=1.0)
    testing = row_ok & (temp > 0.0) & (top_p < 1.0)
    if tl.max(testing.to(tl.int32), axis=0) > 0:
        c = tl.arange(0, C_PAD)[None, :]
        parts = tl.load(cabove_ptr + rows[:, None] * C + c, mask=testing[:, None] & (c < C), other=0.0)
        above = tl.sum(parts, axis=1)
        mass = tl.load(mass_ptr + rows, mask=testing, other=0.0)
        target = top_p * mass
        # A token is kept while the mass above it is below top_p of the mass (the top one always).
        kept = (above < target) | (above == 0.0)
        active = testing & ~kept
        if tl.max(active.to(tl.int32), axis=0) > 0:
            scale = LOG2E / tl.where(testing, temp, 1.0)
            row_max = tl.load(rmax_ptr + rows, mask=testing, other=0.0)
            seed = tl.load(seed_ptr + rows, mask=testing, other=0)
            piv = tl.load(piv_ptr + rows, mask=testing, other=0).to(tl.uint32, bitcast=True)
            token = tl.load(out_ptr + rows, mask=testing, other=0).to(tl.int32)
            lo = tl.load(lo_ptr + rows, mask=testing, other=0).to(tl.uint32, bitcast=True)
            lo = tl.where(active, piv + 1, lo)
            mass = tl.where(active, above, mass)
            hi = _ukey(row_max)
            base = rows.to(tl.int64)[:, None] * vocab
            row_base = rows.to(tl.int64) * vocab
            zero = tl.zeros([ROWS], tl.int32)
            redrawn = active
            rnd = 1
            while tl.max(active.to(tl.int32), axis=0) > 0:
                if rnd < MAX_DRAWS:
                    u = tl.rand(seed, zero + rnd)
                    drawn = _draw(logits_ptr, base, active, vocab, row_max, scale, lo, u * mass, BLOCK_V, BIG)
                    x_t = tl.load(logits_ptr + row_base + drawn, mask=active, other=0.0)
                    piv = _ukey(x_t)
                else:
                    piv = lo + (hi - lo) // 2
                    drawn = token
                above = _mass_above(logits_ptr, base, active, vocab, row_max, scale, piv, BLOCK_V)
                kept = (above < target) | (above == 0.0)
                if rnd < MAX_DRAWS:
                    token = tl.where(active & kept, drawn, token)
                    out = active & ~kept
                    lo = tl.where(out, piv + 1, lo)
                    mass = tl.where(out, above, mass)
                    active = active & ~kept
                else:
                    hi = tl.where(active & kept, piv, hi)
                    out = active & ~kept
                    lo = tl.where(out, piv + 1, lo)
                    mass = tl.where(out, above, mass)
                    closed = active & (lo >= hi)
                    if tl.max(closed.to(tl.int32), axis=0) > 0:
                        u = tl.rand(seed, zero + rnd)
                        last = _draw(
                            logits_ptr, base, closed, vocab, row_max, scale, lo, u * mass, BLOCK_V, BIG
                        )
                        token = tl.where(closed, last, token)
                    active = active & ~closed
                rnd += 1
            tl.store(out_ptr + rows, token.to(tl.int64), mask=redrawn)


def _chunking(vocab):
    """(CHUNK, TILE, ROWS, C, C_PAD) of the split passes: from the vocabulary size only."""
    chunk = min(MAX_CHUNK, max(16, triton.next_power_of_2(triton.cdiv(vocab, MIN_CHUNKS))))
    tile = min(chunk, MAX_TILE)
    rows = 1 if chunk >= MAX_CHUNK else max(1, min(MAX_ROWS, TILE_ELEMENTS // chunk))
    n_chunks = triton.cdiv(vocab, chunk)
    return chunk, tile, rows, n_chunks, triton.next_power_of_2(n_chunks)


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    dev = logits.device
    tokens = torch.empty(n_rows, dtype=torch.int64, device=dev)
    if n_rows == 0:
        return tokens
    logits = logits.contiguous()
    temperature = temperature.contiguous()
    top_k = top_k.to(torch.int32).contiguous()
    top_p = top_p.contiguous()
    seed = seed.contiguous()
    chunk, tile, rows, n_chunks, c_pad = _chunking(vocab)
    i32 = dict(dtype=torch.int32, device=dev)
    f32 = dict(dtype=torch.float32, device=dev)
    cmax = torch.empty((n_rows, n_chunks), **f32)
    carg = torch.empty((n_rows, n_chunks), **i32)
    hist = torch.empty((2, n_rows, n_chunks, BINS), **i32)
    k_pre = torch.empty((4, n_rows), **i32)
    k_above = torch.empty((4, n_rows), **i32)
    lo = torch.empty(n_rows, **i32)
    rmax = torch.empty(n_rows, **f32)
    cmass = torch.empty((n_rows, n_chunks), **f32)
    clast = torch.empty((n_rows, n_chunks), **i32)
    mass = torch.empty(n_rows, **f32)
    piv = torch.empty(n_rows, **i32)
    cabove = torch.empty((n_rows, n_chunks), **f32)
    grid = (triton.cdiv(n_rows, rows), n_chunks)
    shape = dict(CHUNK=chunk, TILE=tile, ROWS=rows, LOG2E=LOG2E)
    params = (temperature, top_k, top_p)

    _first[grid](
        logits,
        *params,
        cmax,
        carg,
        hist[0],
        n_rows,
        vocab,
        n_chunks,
        BINS=BINS,
        BIG=BIG,
        **shape,
        num_warps=SPLIT_WARPS,
    )
    for r in (1, 2, 3):
        _k_round[grid](
            logits,
            *params,
            k_pre,
            k_above,
            hist[(r - 1) % 2],
            hist[r % 2],
            n_rows,
            vocab,
            n_chunks,
            ROUND=r,
            C_PAD=c_pad,
            BINS=BINS,
            **shape,
            num_warps=SPLIT_WARPS,
        )
    _k_last[grid](
        logits,
        *params,
        cmax,
        k_pre,
        k_above,
        hist[1],
        lo,
        rmax,
        cmass,
        clast,
        n_rows,
        vocab,
        n_chunks,
        C_PAD=c_pad,
        BINS=BINS,
        **shape,
        num_warps=SPLIT_WARPS,
    )
    _draw0[(triton.cdiv(n_rows, rows),)](
        logits,
        temperature,
        seed,
        cmax,
        carg,
        rmax,
        lo,
        cmass,
        clast,
        mass,
        piv,
        tokens,
        n_rows,
        vocab,
        n_chunks,
        CHUNK=chunk,
        ROWS=rows,
        C_PAD=c_pad,
        LOG2E=LOG2E,
        BIG=BIG,
        num_warps=DRAW_WARPS,
    )
    _above0[grid](
        logits, temperature, top_p, rmax, piv, cabove, n_rows, vocab, n_chunks, **shape, num_warps=SPLIT_WARPS
    )
    block_v = min(triton.next_power_of_2(vocab), MAX_BLOCK_V)
    loop_rows = max(1, min(MAX_ROWS, LOOP_ELEMENTS // triton.next_power_of_2(vocab)))
    _finish[(triton.cdiv(n_rows, loop_rows),)](
        logits,
        temperature,
        top_p,
        seed,
        rmax,
        lo,
        mass,
        piv,
        cabove,
        tokens,
        n_rows,
        vocab,
        n_chunks,
        ROWS=loop_rows,
        C_PAD=c_pad,
        BLOCK_V=block_v,
        MAX_DRAWS=MAX_DRAWS,
        BIG=BIG,
        LOG2E=LOG2E,
        num_warps=LOOP_WARPS,
    )
    return tokens
