"""Sampling, split over the vocabulary: the seed's rules on a (request, chunk) grid.

Same semantics as ``nodice/examples/sampling/seed.py``: monotone fp32 -> key map, exact top-k
boundary (k-th largest key, ties kept), exact top-p boundary (kept = keys >= L, L the largest key
whose mass at or above it reaches top_p · top-k mass, i.e. the seed's "mass strictly above < top_p"
rule, ties kept together), one uniform ``tl.rand(seed, 0)`` from the request's own seed, an
inverse-CDF walk over the kept tokens in vocabulary order; temperature 0 = first argmax.

Structure (every row's vocabulary is cut into C = cdiv(V, CHUNK) chunks, CHUNK from V only):

- L0 (B×C): per-chunk max / first argmax; per-chunk count histogram of the top 8-bit key digit.
- L1..L3 (B×C): top-k radix rounds 2..4: each program sums the previous round's C histograms in a
  fixed order (integers: exact), picks the digit (every program of a row computes the same thing;
  chunk 0 records it), then histograms the next digit among keys in the new bracket.
- L4 (B×C): last top-k pick -> k-th key; row max; weights w = exp((x - max)/T) of keys >= k-th key;
  per-chunk float mass histogram of the top digit (a one-hot 16×16 tl.dot, fixed shape).
- L5..L7 (B×C): top-p radix rounds on float mass, same scheme; chunks combined by a fixed tree
  that depends on C (V) only.
- L8 (B×C): last top-p pick -> L; per-chunk kept mass and last kept token.
- L9 (B): exclusive prefix of the chunk masses, threshold u·mass, the one chunk holding it walks
  its tokens (cumsum in vocabulary order); greedy rows combine the chunk argmaxes in chunk order.

Small vocabularies pack ROWS rows into a program (ROWS from V only, as the seed does; the
interpreter pays per operation); at real vocabularies ROWS = 1. Rows never interact inside a
program: every reduction runs along a row's own vocabulary or chunk axis.

Rows skip the work they do not need (greedy: all; top_k = 0: the top-k rounds; top_p >= 1: the
top-p rounds) -- decided by the row's own parameters only. No atomics; every reduction's shape
and order depends on V alone, never on B or on where the row sits in the batch.
"""

import torch
import triton
import triton.language as tl

DIGIT_BITS = 8
BINS = 256
MAX_CHUNK = 4096
MIN_CHUNKS = 8  # small vocabularies (the CPU problem) still get several chunks per row
MAX_TILE = 512
TILE_ELEMENTS = 4096  # ROWS × TILE of the packed (small-vocabulary) programs
MAX_ROWS = 128


@triton.jit
def _ukey(x):
    # Monotone float32 -> uint32 map (the seed's int32 key with its sign bit flipped).
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return key.to(tl.uint32, bitcast=True) ^ tl.full(key.shape, 0x80000000, tl.uint32)


@triton.jit
def _row_params(temp, k, top_p, vocab):
    # Helpers get loaded values, never row-offset pointers (the gate's static analysis taints a
    # helper's result with every argument's dependencies).
    greedy = temp <= 0.0
    inv_temp = 1.0 / tl.where(greedy, 1.0, temp)
    k = tl.where((k <= 0) | (k > vocab), vocab, k)
    do_k = (temp > 0.0) & (k < vocab)
    do_p = (temp > 0.0) & (top_p < 1.0)
    return greedy, inv_temp, k, do_k, do_p


@triton.jit
def _in_bracket(ukey, pre, SHIFT: tl.constexpr):
    # Keys whose digits above SHIFT equal the row's bracket prefix (all keys when nothing is known).
    if SHIFT + 8 >= 32:
        return ukey == ukey
    else:
        return (ukey >> (SHIFT + 8)) == (pre[:, None] >> (SHIFT + 8))


@triton.jit
def _pick(h, above, target, BINS: tl.constexpr):
    """Per row: the largest digit d >= 1 whose (above + hist[d:]) reaches target, else 0 (the
    bracket's floor, known to reach it). h: [ROWS, C_PAD, BINS] chunk histograms (padding zero),
    chunks combined by a fixed tree (shape from V only), bins by a fixed suffix scan.
    Returns the digit, the amount strictly above the new bracket and the histogram's total."""
    d = tl.arange(0, BINS)[None, :]
    h = tl.sum(h, axis=1)
    s = tl.cumsum(h, axis=1, reverse=True)
    ok = ((above[:, None] + s) >= target[:, None]) & (d >= 1)
    digit = tl.max(tl.where(ok, d, 0), axis=1)
    s_next = tl.sum(tl.where(d == digit[:, None] + 1, s, 0), axis=1)
    total = tl.sum(tl.where(d == 0, s, 0), axis=1)
    return digit, above + s_next, total


@triton.jit
def _count_tile(digit, sel, ROWS: tl.constexpr, TILE: tl.constexpr, BINS: tl.constexpr):
    # Per-row integer histograms [ROWS, BINS] of a [ROWS, TILE] tile (row r's bins at r·BINS).
    r = tl.arange(0, ROWS)[:, None]
    flat = tl.reshape(digit + r * BINS, [ROWS * TILE])
    h = tl.histogram(flat, ROWS * BINS, mask=tl.reshape(sel, [ROWS * TILE]))
    return tl.reshape(h, [ROWS, BINS])


@triton.jit
def _mass_tile(
    x, ok, inv_temp, row_max, kth, pre, acc, SHIFT: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr
):
    """acc[ROWS, 16, 16] += float mass of a tile's top-k tokens in the row's bracket per 8-bit
    digit at SHIFT (high nibble, low nibble): a one-hot tl.dot of fixed shape per row."""
    r16 = tl.arange(0, 16)
    ukey = _ukey(x)
    sel = ok & (ukey >= kth[:, None]) & _in_bracket(ukey, pre, SHIFT)
    w = tl.where(sel, tl.exp((x - row_max[:, None]) * inv_temp[:, None]), 0.0)
    digit = ((ukey >> SHIFT) & 255).to(tl.int32)
    a = tl.where((digit >> 4)[:, None, :] == r16[None, :, None], w[:, None, :], 0.0)  # [ROWS, 16, TILE]
    b = ((digit & 15)[:, :, None] == r16[None, None, :]).to(tl.float32)  # [ROWS, TILE, 16]
    # A tile without mass in the bracket would add exact zeros: skip its dot (same bits).
    if tl.max(tl.max(w, axis=1), axis=0) > 0.0:
        if ROWS == 1:
            a2 = tl.reshape(a, [16, TILE])
            b2 = tl.reshape(b, [TILE, 16])
            acc = tl.reshape(tl.dot(a2, b2, tl.reshape(acc, [16, 16]), input_precision="tf32x3"), [1, 16, 16])
        else:
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
    return acc


@triton.jit
def _kept(x, ok, inv_temp, row_max, lo):
    w = tl.exp((x - row_max[:, None]) * inv_temp[:, None])
    kept = ok & (_ukey(x) >= lo[:, None]) & (w > 0.0)
    return kept, tl.where(kept, w, 0.0)


@triton.jit
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
):
    """Per chunk: max, first argmax, count histogram of the top key digit (rows with top-k)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    _greedy, _inv_temp, _k, do_k, _do_p = _row_params(
        temp,
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
    )
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
        a = tl.min(tl.where(x == m[:, None], cols, 2**31 - 1), axis=1)
        arg = tl.where(m > best, a, arg)
        best = tl.maximum(best, m)
        if any_k:
            digit = (_ukey(x) >> 24).to(tl.int32)
            h += _count_tile(digit, ok & do_k[:, None], ROWS, TILE, BINS)
    tl.store(cmax_ptr + rows * C + cid, best, mask=row_ok)
    tl.store(carg_ptr + rows * C + cid, arg, mask=row_ok)
    if any_k:
        hp = hist_ptr + (rows * C + cid).to(tl.int64)[:, None] * BINS + tl.arange(0, BINS)[None, :]
        tl.store(hp, h, mask=(row_ok & do_k)[:, None])


@triton.jit
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
):
    """Pick top-k digit ROUND-1 (of 4), then histogram digit ROUND within the new bracket."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0  # chunk 0 records the row's picks
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    _greedy, _inv_temp, k, do_k, _do_p = _row_params(
        temp,
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
    )
    if tl.max(do_k.to(tl.int32), axis=0) > 0:
        live = row_ok & do_k
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
        digit, above, _total = _pick(h, above, k, BINS)
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


@triton.jit
def _p_first(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    cmax_ptr,
    pre_ptr,
    above_ptr,
    hist_in_ptr,
    kth_ptr,
    rmax_ptr,
    hist_out_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
    BINS: tl.constexpr,
):
    """Last top-k pick (the k-th key), the row max, and the top-p mass histogram of the top digit."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0  # chunk 0 records the row's picks
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    _greedy, inv_temp, k, do_k, do_p = _row_params(
        temp,
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
    )
    c = tl.arange(0, C_PAD)[None, :]
    cm = tl.load(cmax_ptr + rows[:, None] * C + c, mask=row_ok[:, None] & (c < C), other=float("-inf"))
    row_max = tl.max(cm, axis=1)
    kth = tl.full([ROWS], 0, tl.uint32)
    if tl.max(do_k.to(tl.int32), axis=0) > 0:
        live = row_ok & do_k
        c3 = tl.arange(0, C_PAD)[None, :, None]
        hoffs = (rows[:, None, None] * C + c3).to(tl.int64) * BINS + tl.arange(0, BINS)[None, None, :]
        h = tl.load(hist_in_ptr + hoffs, mask=live[:, None, None] & (c3 < C), other=0)
        pre = tl.load(pre_ptr + 3 * n_rows + rows, mask=live, other=0).to(tl.uint32, bitcast=True)
        above = tl.load(above_ptr + 3 * n_rows + rows, mask=live, other=0)
        digit, above, _total = _pick(h, above, k, BINS)
        kth = tl.where(live, pre | digit.to(tl.uint32), kth)
    tl.store(kth_ptr + rows, kth.to(tl.int32, bitcast=True), mask=row_ok & lead)
    tl.store(rmax_ptr + rows, row_max, mask=row_ok & lead)
    if tl.max(do_p.to(tl.int32), axis=0) > 0:
        live = row_ok & do_p
        base = rows.to(tl.int64)[:, None] * vocab
        acc = tl.zeros([ROWS, 16, 16], tl.float32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = live[:, None] & (cols < vocab)
            x = tl.load(logits_ptr + base + cols, mask=ok, other=0.0)
            acc = _mass_tile(x, ok, inv_temp, row_max, kth, kth, acc, 24, ROWS, TILE)
        r16 = tl.arange(0, 16)
        hp = (
            hist_out_ptr
            + (rows * C + cid).to(tl.int64)[:, None, None] * BINS
            + r16[None, :, None] * 16
            + r16[None, None, :]
        )
        tl.store(hp, acc, mask=live[:, None, None])


@triton.jit
def _p_round(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    kth_ptr,
    rmax_ptr,
    pre_ptr,
    above_ptr,
    target_ptr,
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
):
    """Pick top-p digit ROUND-1 (of 4), then the mass histogram of digit ROUND in the new bracket."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0  # chunk 0 records the row's picks
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    top_p = tl.load(top_p_ptr + rows, mask=row_ok, other=1.0)
    _greedy, inv_temp, _k, _do_k, do_p = _row_params(
        temp, tl.load(top_k_ptr + rows, mask=row_ok, other=0), top_p, vocab
    )
    if tl.max(do_p.to(tl.int32), axis=0) > 0:
        live = row_ok & do_p
        c3 = tl.arange(0, C_PAD)[None, :, None]
        hoffs = (rows[:, None, None] * C + c3).to(tl.int64) * BINS + tl.arange(0, BINS)[None, None, :]
        h = tl.load(hist_in_ptr + hoffs, mask=live[:, None, None] & (c3 < C), other=0.0)
        if ROUND == 1:
            pre = tl.full([ROWS], 0, tl.uint32)
            above = tl.full([ROWS], 0.0, tl.float32)
            # The top-k mass: the whole first histogram, combined as every later pick combines it.
            digit, _above0, total = _pick(h, above, above, BINS)
            target = top_p * total
            tl.store(target_ptr + rows, target, mask=live & lead)
        else:
            pre = tl.load(pre_ptr + (ROUND - 1) * n_rows + rows, mask=live, other=0).to(
                tl.uint32, bitcast=True
            )
            above = tl.load(above_ptr + (ROUND - 1) * n_rows + rows, mask=live, other=0.0)
            target = tl.load(target_ptr + rows, mask=live, other=0.0)
        digit, above, total = _pick(h, above, target, BINS)
        pre = pre | (digit.to(tl.uint32) << (32 - 8 * ROUND))
        tl.store(pre_ptr + ROUND * n_rows + rows, pre.to(tl.int32, bitcast=True), mask=live & lead)
        tl.store(above_ptr + ROUND * n_rows + rows, above, mask=live & lead)
        kth = tl.load(kth_ptr + rows, mask=live, other=0).to(tl.uint32, bitcast=True)
        row_max = tl.load(rmax_ptr + rows, mask=live, other=0.0)
        base = rows.to(tl.int64)[:, None] * vocab
        acc = tl.zeros([ROWS, 16, 16], tl.float32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = live[:, None] & (cols < vocab)
            x = tl.load(logits_ptr + base + cols, mask=ok, other=0.0)
            acc = _mass_tile(x, ok, inv_temp, row_max, kth, pre, acc, 24 - 8 * ROUND, ROWS, TILE)
        r16 = tl.arange(0, 16)
        hp = (
            hist_out_ptr
            + (rows * C + cid).to(tl.int64)[:, None, None] * BINS
            + r16[None, :, None] * 16
            + r16[None, None, :]
        )
        tl.store(hp, acc, mask=live[:, None, None])


@triton.jit
def _chunk_mass(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    kth_ptr,
    rmax_ptr,
    pre_ptr,
    above_ptr,
    target_ptr,
    hist_in_ptr,
    lo_ptr,
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
):
    """Last top-p pick (the kept set is keys >= lo), then this chunk's kept mass and last kept token."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cid = tl.program_id(1)
    row_ok = rows < n_rows
    lead = (tl.zeros([ROWS], tl.int32) + cid) == 0  # chunk 0 records the row's picks
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    _greedy, inv_temp, _k, _do_k, do_p = _row_params(
        temp,
        tl.load(top_k_ptr + rows, mask=row_ok, other=0),
        tl.load(top_p_ptr + rows, mask=row_ok, other=1.0),
        vocab,
    )
    sampled = row_ok & (temp > 0.0)
    if tl.max(sampled.to(tl.int32), axis=0) > 0:
        kth = tl.load(kth_ptr + rows, mask=sampled, other=0).to(tl.uint32, bitcast=True)
        lo = kth
        if tl.max(do_p.to(tl.int32), axis=0) > 0:
            live = row_ok & do_p
            c3 = tl.arange(0, C_PAD)[None, :, None]
            hoffs = (rows[:, None, None] * C + c3).to(tl.int64) * BINS + tl.arange(0, BINS)[None, None, :]
            h = tl.load(hist_in_ptr + hoffs, mask=live[:, None, None] & (c3 < C), other=0.0)
            pre = tl.load(pre_ptr + 3 * n_rows + rows, mask=live, other=0).to(tl.uint32, bitcast=True)
            above = tl.load(above_ptr + 3 * n_rows + rows, mask=live, other=0.0)
            target = tl.load(target_ptr + rows, mask=live, other=0.0)
            digit, above, _total = _pick(h, above, target, BINS)
            lo = tl.where(live, tl.maximum(pre | digit.to(tl.uint32), kth), lo)
        tl.store(lo_ptr + rows, lo.to(tl.int32, bitcast=True), mask=sampled & lead)
        row_max = tl.load(rmax_ptr + rows, mask=sampled, other=0.0)
        base = rows.to(tl.int64)[:, None] * vocab
        mass = tl.zeros([ROWS], tl.float32)
        last = tl.full([ROWS], -1, tl.int32)
        for t in range(0, CHUNK, TILE):
            cols = cid * CHUNK + t + tl.arange(0, TILE)[None, :]
            ok = sampled[:, None] & (cols < vocab)
            x = tl.load(logits_ptr + base + cols, mask=ok, other=0.0)
            kept, w = _kept(x, ok, inv_temp, row_max, lo)
            mass += tl.sum(w, axis=1)
            last = tl.maximum(last, tl.max(tl.where(kept, cols, -1), axis=1))
        tl.store(cmass_ptr + rows * C + cid, mass, mask=sampled)
        tl.store(clast_ptr + rows * C + cid, last, mask=sampled)


@triton.jit
def _draw(
    logits_ptr,
    temp_ptr,
    seed_ptr,
    cmax_ptr,
    carg_ptr,
    rmax_ptr,
    lo_ptr,
    cmass_ptr,
    clast_ptr,
    out_ptr,
    n_rows,
    vocab,
    C,
    CHUNK: tl.constexpr,
    ROWS: tl.constexpr,
    C_PAD: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    greedy = temp <= 0.0
    sampled = row_ok & (temp > 0.0)
    inv_temp = 1.0 / tl.where(greedy, 1.0, temp)
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
        # Rounding can leave the chunks a hair short of u·mass: then the last kept token.
        fallback = tl.max(last, axis=1)
        fallback = tl.where(fallback < 0, 0, fallback)
        found = sampled & (star < C_PAD)
        excl = tl.sum(tl.where(c == star[:, None] - 1, incl, 0.0), axis=1)
        row_max = tl.load(rmax_ptr + rows, mask=found, other=0.0)
        lo = tl.load(lo_ptr + rows, mask=found, other=0).to(tl.uint32, bitcast=True)
        cols = star[:, None] * CHUNK + tl.arange(0, CHUNK)[None, :]
        ok = found[:, None] & (cols < vocab)
        x = tl.load(logits_ptr + rows.to(tl.int64)[:, None] * vocab + cols, mask=ok, other=0.0)
        kept, w = _kept(x, ok, inv_temp, row_max, lo)
        running = excl[:, None] + tl.cumsum(w, axis=1)
        hit = tl.min(tl.where(kept & (running > threshold[:, None]), cols, 2**31 - 1), axis=1)
        chunk_last = tl.sum(tl.where(c == star[:, None], last, 0), axis=1)
        walked = tl.where(hit == 2**31 - 1, chunk_last, hit)
        token = tl.where(sampled, tl.where(found, walked, fallback), token)
    tl.store(out_ptr + rows, token.to(tl.int64), mask=row_ok)


def _chunking(vocab):
    """(CHUNK, TILE, ROWS, C, C_PAD): from the vocabulary size only."""
    chunk = min(MAX_CHUNK, max(16, triton.next_power_of_2(triton.cdiv(vocab, MIN_CHUNKS))))
    tile = min(chunk, MAX_TILE)
    rows = max(1, min(MAX_ROWS, TILE_ELEMENTS // chunk))
    n_chunks = triton.cdiv(vocab, chunk)
    return chunk, tile, rows, n_chunks, triton.next_power_of_2(n_chunks)


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    dev = logits.device
    chunk, tile, rows, n_chunks, c_pad = _chunking(vocab)
    top_k = top_k.to(torch.int32)
    i32 = dict(dtype=torch.int32, device=dev)
    f32 = dict(dtype=torch.float32, device=dev)
    cmax = torch.empty((n_rows, n_chunks), **f32)
    carg = torch.empty((n_rows, n_chunks), **i32)
    hist_k = torch.empty((2, n_rows, n_chunks, BINS), **i32)
    hist_p = torch.empty((2, n_rows, n_chunks, BINS), **f32)
    k_pre = torch.empty((4, n_rows), **i32)
    k_above = torch.empty((4, n_rows), **i32)
    p_pre = torch.empty((4, n_rows), **i32)
    p_above = torch.empty((4, n_rows), **f32)
    target = torch.empty(n_rows, **f32)
    kth = torch.empty(n_rows, **i32)
    rmax = torch.empty(n_rows, **f32)
    lo = torch.empty(n_rows, **i32)
    cmass = torch.empty((n_rows, n_chunks), **f32)
    clast = torch.empty((n_rows, n_chunks), **i32)
    tokens = torch.empty(n_rows, dtype=torch.int64, device=dev)
    grid = (triton.cdiv(n_rows, rows), n_chunks)
    shape = dict(CHUNK=chunk, TILE=tile, ROWS=rows, BINS=BINS)
    params = (temperature, top_k, top_p)
    nw = 4

    _first[grid](logits, *params, cmax, carg, hist_k[0], n_rows, vocab, n_chunks, **shape, num_warps=nw)
    for r in (1, 2, 3):
        _k_round[grid](
            logits,
            *params,
            k_pre,
            k_above,
            hist_k[(r - 1) % 2],
            hist_k[r % 2],
            n_rows,
            vocab,
            n_chunks,
            ROUND=r,
            C_PAD=c_pad,
            **shape,
            num_warps=nw,
        )
    _p_first[grid](
        logits,
        *params,
        cmax,
        k_pre,
        k_above,
        hist_k[1],
        kth,
        rmax,
        hist_p[0],
        n_rows,
        vocab,
        n_chunks,
        C_PAD=c_pad,
        **shape,
        num_warps=nw,
    )
    for r in (1, 2, 3):
        _p_round[grid](
            logits,
            *params,
            kth,
            rmax,
            p_pre,
            p_above,
            target,
            hist_p[(r - 1) % 2],
            hist_p[r % 2],
            n_rows,
            vocab,
            n_chunks,
            ROUND=r,
            C_PAD=c_pad,
            **shape,
            num_warps=nw,
        )
    _chunk_mass[grid](
        logits,
        *params,
        kth,
        rmax,
        p_pre,
        p_above,
        target,
        hist_p[1],
        lo,
        cmass,
        clast,
        n_rows,
        vocab,
        n_chunks,
        C_PAD=c_pad,
        **shape,
        num_warps=nw,
    )
    _draw[(triton.cdiv(n_rows, rows),)](
        logits,
        temperature,
        seed,
        cmax,
        carg,
        rmax,
        lo,
        cmass,
        clast,
        tokens,
        n_rows,
        vocab,
        n_chunks,
        CHUNK=chunk,
        ROWS=rows,
        C_PAD=c_pad,
        num_warps=8,
    )
    return tokens
