"""Sampling, the per-request kernel with fewer passes for top-k requests (a candidate).

Against ``sampling_per_request.py`` (the bundled kernel until 2026-12-04): the select's first
8-bit digit is counted in the max pass (three radix passes instead of four), and the kept-mass
pass draws the first token as it goes (no separate draw round for a top-k request). On the H200
(2026-12-03, ``stages_sampling.py``) the streaming draw saved 1-3 % on top-k requests when measured
with 2048-bin digits; this 256-bin version passed the whole gate on CUDA on 2026-12-04 and timed
within ±5 % of the per-request kernel (``lab/results/h200_2026-12-04/callA/stages``). The
description of the per-request kernel follows, updated. The helpers ``_ukey``, ``_draw`` and
``_mass_above`` are that kernel's, copied: the gate rejects a candidate that imports a library's
kernels (``library-call``), so a candidate stands alone.


``tokens[b]`` is drawn from softmax(logits[b] / temperature[b]) restricted to the top_k[b] largest
logits (ties kept; 0 = all), then to the smallest prefix of those, by descending probability, whose
renormalised mass reaches top_p[b]; temperature 0 is the first argmax. Every decision is made by
the request's own program from its own row, parameters and seed.

The passes over a row (each reads the logits again; at B ≤ 64 they come from L2):

1. **Max, first argmax and the softmax normaliser** in one pass (an online rescale per chunk);
   where the request has a top-k, the same pass counts the first digit of the select below.
   Greedy requests stop here.
2. **Top-k** (only when 0 < k < V): the k-th largest order-preserving uint32 key, found exactly
   digit by digit (four 8-bit digits): each step histograms the next digit of the keys that share
   the digits found so far (``tl.histogram``: integer counts), then picks the digit where the
   count from the top reaches the remaining k. The first digit's counts come from pass 1, so the
   select costs three passes. Kept: keys ≥ that key. One more pass sums the kept mass and draws
   the first token at the same time, chunk by chunk: a token drawn inside the chunk (inverse CDF,
   one uniform) replaces the one held with probability chunk mass / mass so far (another), so
   each kept token ends up drawn with probability w / kept mass, without knowing that mass first.
3. **The draw with top-p by rejection.** Draw a token from the current candidate set
   (keys ≥ ``lo``; at first the top-k set, whose first token is drawn already) by an inverse-CDF
   walk in vocabulary order with one uniform ``tl.rand(seed, round)``; one pass sums the mass
   strictly above the drawn token. If that is below top_p × (top-k mass), the token is in the
   top-p set: done (with top_p ≥ 1 the test pass is skipped). Otherwise no token at or below it
   is in the set, so ``lo`` moves just above it and the next round draws again from the smaller
   set, whose mass is the sum just computed. Each accepted draw is, conditionally, a draw from
   the exact filtered distribution. After ``MAX_DRAWS`` rejections the boundary is found by
   bisection on the key instead (the same test pass on a midpoint key; at most 32 steps), then
   one last draw: the worst case is bounded. Most requests take one round: with top_p = 0.9 a
   draw lands in the set nine times in ten.

Why it is batch-invariant:

- one program per request (``ROWS`` requests per program only for small vocabularies, where the
  interpreter pays per operation; ``ROWS`` and the chunk ``BLOCK_V`` follow from V alone), and
  every reduction runs along the row's own vocabulary, chunk by chunk in the same order;
- the uniforms come from the request's seed and the round (or chunk) number only — never its row
  index, the batch size or the batchmates' seeds;
- a program that holds several requests loops until all of them are done, but a finished
  request's state no longer changes: its token is the one it would get alone;
- integer histograms and fixed-order float sums: no atomics, no split over programs, and the
  batch size is not a specialised argument (``do_not_specialize``), so one compiled kernel
  serves every batch.
"""

import torch
import triton
import triton.language as tl

# Elements of one program's chunk: ROWS × BLOCK_V. Real vocabularies get one request per program.
TILE_ELEMENTS = 32768
MAX_BLOCK_V = 4096
MAX_ROWS = 128
NUM_WARPS = 16
# Rejection rounds before the boundary is bisected instead.
MAX_DRAWS = 8
# Radix digits of the top-k select over the 32-bit keys: four of 8 bits, the first counted in the
# max pass. (tl.histogram's cost grows with the bins: 2048-bin digits, three passes instead of four,
# measured 5x slower on the H200.)
BINS = 256
BIG = 2**31 - 1
# Random offsets of the kept-mass pass's draw (two per chunk), apart from the rounds' (0, 1, 2, ...).
CHUNK_STREAM = 1 << 20
LOG2E = 1.4426950408889634


@triton.jit
def _ukey(x):
    # Monotone float32 -> uint32 map: negative numbers' magnitude bits flipped, then the sign bit.
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return key.to(tl.uint32, bitcast=True) ^ 0x80000000


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
def _sample(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    seed_ptr,
    out_ptr,
    n_rows,
    vocab,
    ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BINS: tl.constexpr,
    MAX_DRAWS: tl.constexpr,
    BIG: tl.constexpr,
    LOG2E: tl.constexpr,
    CHUNK_STREAM: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=0.0)
    greedy = temp <= 0.0
    scale = LOG2E / tl.where(greedy, 1.0, temp)
    top_k = tl.load(top_k_ptr + rows, mask=row_ok, other=0)
    do_k = row_ok & ~greedy & (top_k > 0) & (top_k < vocab)
    top_p = tl.load(top_p_ptr + rows, mask=row_ok, other=1.0)
    do_p = row_ok & ~greedy & (top_p < 1.0)
    seed = tl.load(seed_ptr + rows, mask=row_ok, other=0)
    row_base = rows.to(tl.int64) * vocab
    base = row_base[:, None]
    cols0 = tl.arange(0, BLOCK_V)

    # Pass 1: max, first argmax, and the normaliser sum(exp2((x - max)·scale)), rescaled per chunk.
    row_max = tl.full([ROWS], float("-inf"), tl.float32)
    arg_max = tl.full([ROWS], 0, tl.int32)
    total = tl.zeros([ROWS], tl.float32)
    any_k = tl.max(do_k.to(tl.int32), axis=0) > 0
    r = tl.arange(0, ROWS)[:, None]
    hist0 = tl.zeros([ROWS, BINS], tl.int32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + cols0
        ok = row_ok[:, None] & (cols[None, :] < vocab)
        x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
        if any_k:
            # The top-k select's first digit: the keys' top 8 bits, counted while the row is here.
            top = (_ukey(x) >> 24).to(tl.int32) + r * BINS
            k_ok = tl.reshape(ok & do_k[:, None], [ROWS * BLOCK_V])
            hist0 += tl.reshape(
                tl.histogram(tl.reshape(top, [ROWS * BLOCK_V]), ROWS * BINS, mask=k_ok), [ROWS, BINS]
            )
        chunk_max = tl.max(x, axis=1)
        chunk_arg = tl.min(tl.where(x == chunk_max[:, None], cols[None, :], BIG), axis=1)
        new_max = tl.maximum(row_max, chunk_max)
        arg_max = tl.where(chunk_max > row_max, chunk_arg, arg_max)
        rescale = tl.where(row_max == new_max, 1.0, tl.exp2((row_max - new_max) * scale))
        w = tl.where(ok, tl.exp2((x - new_max[:, None]) * scale[:, None]), 0.0)
        total = total * rescale + tl.sum(w, axis=1)
        row_max = new_max
    row_max = tl.where(row_ok, row_max, 0.0)
    max_key = _ukey(row_max)

    # Top-k: the k-th largest key, one 8-bit digit per step; `prefix` holds the digits
    # found so far and `k_left` how many of the k lie at or below the current bracket.
    lo = tl.zeros([ROWS], tl.uint32)
    mass = total
    zero = tl.zeros([ROWS], tl.int32)
    first = tl.zeros([ROWS], tl.int32)
    pre_drawn = tl.zeros([ROWS], tl.int1)
    if any_k:
        digits = tl.arange(0, BINS)
        prefix = tl.zeros([ROWS], tl.uint32)
        k_left = top_k
        for step in tl.static_range(4):
            shift = 24 - 8 * step
            if step == 0:
                hist = hist0
            else:
                hist = tl.zeros([ROWS, BINS], tl.int32)
                for start in range(0, vocab, BLOCK_V):
                    cols = start + cols0
                    ok = do_k[:, None] & (cols[None, :] < vocab)
                    x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
                    key = _ukey(x)
                    ok = ok & ((key >> (shift + 8)) == (prefix[:, None] >> (shift + 8)))
                    digit = ((key >> shift) & (BINS - 1)).to(tl.int32)
                    flat = tl.reshape(digit + r * BINS, [ROWS * BLOCK_V])
                    hist += tl.reshape(
                        tl.histogram(flat, ROWS * BINS, mask=tl.reshape(ok, [ROWS * BLOCK_V])), [ROWS, BINS]
                    )
            # Count at or above each digit; the digit is the largest one whose count reaches k_left.
            at_or_above = tl.cumsum(hist, axis=1, reverse=True)
            pick = tl.max(tl.where(at_or_above >= k_left[:, None], digits[None, :], 0), axis=1)
            above = tl.sum(tl.where(digits[None, :] == pick[:, None], at_or_above - hist, 0), axis=1)
            k_left = k_left - above
            prefix = prefix | (pick.to(tl.uint32) << shift)
        lo = tl.where(do_k, prefix, lo)
        # One pass sums the kept mass and draws the first token with it, chunk by chunk: a token
        # drawn inside the chunk (inverse CDF) replaces the one held with probability
        # chunk mass / mass so far, which leaves each kept token drawn with probability w / mass.
        k_mass = tl.zeros([ROWS], tl.float32)
        for start in range(0, vocab, BLOCK_V):
            cols = start + cols0
            ok = do_k[:, None] & (cols[None, :] < vocab)
            x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
            w = tl.exp2((x - row_max[:, None]) * scale[:, None])
            kept = ok & (_ukey(x) >= lo[:, None]) & (w > 0.0)
            w = tl.where(kept, w, 0.0)
            chunk_mass = tl.sum(w, axis=1)
            k_mass += chunk_mass
            offset = zero + (CHUNK_STREAM + 2 * (start // BLOCK_V))
            hit = kept & (tl.cumsum(w, axis=1) > (tl.rand(seed, offset) * chunk_mass)[:, None])
            pick = tl.min(tl.where(hit, cols[None, :], BIG), axis=1)
            pick = tl.where(pick == BIG, tl.max(tl.where(kept, cols[None, :], 0), axis=1), pick)
            take = (chunk_mass > 0.0) & (tl.rand(seed, offset + 1) * k_mass < chunk_mass)
            first = tl.where(take, pick, first)
        mass = tl.where(do_k, k_mass, mass)
        pre_drawn = do_k

    # The draw. Candidates: keys ≥ lo (keys below are out); keys ≥ hi are known to be kept.
    target = top_p * mass
    hi = max_key
    token = arg_max
    active = row_ok & ~greedy
    rnd = 0
    while tl.max(active.to(tl.int32), axis=0) > 0:
        if rnd < MAX_DRAWS:
            # Top-k requests drew their first token in the kept-mass pass.
            drawing = active & ~pre_drawn
            drawn = first
            if tl.max(drawing.to(tl.int32), axis=0) > 0:
                u = tl.rand(seed, zero + rnd)
                fresh = _draw(logits_ptr, base, drawing, vocab, row_max, scale, lo, u * mass, BLOCK_V, BIG)
                drawn = tl.where(drawing, fresh, first)
            pre_drawn = tl.zeros([ROWS], tl.int1)
            x_t = tl.load(logits_ptr + row_base + drawn, mask=active, other=0.0)
            piv = _ukey(x_t)
        else:
            piv = lo + (hi - lo) // 2
            drawn = token
        testing = active & do_p
        above = tl.zeros([ROWS], tl.float32)
        if tl.max(testing.to(tl.int32), axis=0) > 0:
            above = _mass_above(logits_ptr, base, testing, vocab, row_max, scale, piv, BLOCK_V)
        # A token is kept while the mass above it is below top_p of the mass (the top one always).
        kept = ~testing | (above < target) | (above == 0.0)
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
                last = _draw(logits_ptr, base, closed, vocab, row_max, scale, lo, u * mass, BLOCK_V, BIG)
                token = tl.where(closed, last, token)
            active = active & ~closed
        rnd += 1
    tl.store(out_ptr + rows, token.to(tl.int64), mask=row_ok)


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    tokens = torch.empty(n_rows, dtype=torch.int64, device=logits.device)
    if n_rows == 0:
        return tokens
    block_v = min(triton.next_power_of_2(vocab), MAX_BLOCK_V)
    rows = max(1, min(MAX_ROWS, TILE_ELEMENTS // triton.next_power_of_2(vocab)))
    _sample[(triton.cdiv(n_rows, rows),)](
        logits.contiguous(),
        temperature.contiguous(),
        top_k.to(torch.int32).contiguous(),
        top_p.contiguous(),
        seed.contiguous(),
        tokens,
        n_rows,
        vocab,
        ROWS=rows,
        BLOCK_V=block_v,
        BINS=BINS,
        MAX_DRAWS=MAX_DRAWS,
        BIG=BIG,
        LOG2E=LOG2E,
        CHUNK_STREAM=CHUNK_STREAM,
        num_warps=NUM_WARPS,
    )
    return tokens
