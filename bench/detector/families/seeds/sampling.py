"""The sampling seed kernel (nodice/examples/sampling/seed.py) as the pool was built from it."""

import torch
import triton
import triton.language as tl

# Elements of one program's tile: ROWS × BLOCK_V. Wide vocabularies get one row
# per program; small ones pack rows (the interpreter pays per operation).
TILE_ELEMENTS = 32768
MAX_BLOCK_V = 1024
MAX_ROWS = 128
# The boundary searches resolve int32 keys RADIX_BITS bits per pass: exact after 32 bits.
KEY_BITS = 32
RADIX_BITS = 4


@triton.jit
def _order_key(x):
    # Monotone float32 -> int32 map: flip the magnitude bits of negative numbers.
    bits = x.to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _sample(
    logits_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    seed_ptr,
    key_ptr,
    weight_ptr,
    out_ptr,
    n_rows,
    vocab,
    padded_vocab,
    ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    KEY_BITS: tl.constexpr,
    RADIX_BITS: tl.constexpr,
    RADIX: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    temp = tl.load(temp_ptr + rows, mask=row_ok, other=1.0)
    greedy = temp <= 0.0
    inv_temp = 1.0 / tl.where(greedy, 1.0, temp)
    top_k = tl.load(top_k_ptr + rows, mask=row_ok, other=0)
    top_k = tl.where((top_k <= 0) | (top_k > vocab), vocab, top_k)
    top_p = tl.load(top_p_ptr + rows, mask=row_ok, other=1.0)
    seed = tl.load(seed_ptr + rows, mask=row_ok, other=0)
    base = rows.to(tl.int64)[:, None] * vocab
    cols0 = tl.arange(0, BLOCK_V)
    # Scratch rows are padded to whole chunks (keys of padding: the smallest int32;
    # weights: 0), so the search passes need no masks.
    scratch = rows.to(tl.int64)[:, None] * padded_vocab + cols0[None, :]

    # Pass 1: row max, first argmax, and the order keys (scratch) of every logit.
    row_max = tl.full([ROWS], float("-inf"), tl.float32)
    arg_max = tl.zeros([ROWS], dtype=tl.int32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + cols0
        ok = row_ok[:, None] & (cols[None, :] < vocab)
        x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=float("-inf"))
        chunk_max = tl.max(x, axis=1)
        chunk_arg = tl.min(tl.where(x == chunk_max[:, None], cols[None, :], vocab), axis=1)
        arg_max = tl.where(chunk_max > row_max, chunk_arg, arg_max)
        row_max = tl.maximum(row_max, chunk_max)
        # Padding gets the smallest key, which no pivot reaches.
        tl.store(key_ptr + scratch + start, tl.where(ok, _order_key(x), -(2**31)))
    row_max = tl.where(row_ok, row_max, 0.0)

    # Top-k: the k-th largest key, found digit by digit (RADIX pivots per pass over the row):
    # after each pass, `lo` is the largest pivot with count(key >= pivot) >= k.
    digit = 1 + tl.arange(0, RADIX)
    lo = tl.full([ROWS], -(2**31), tl.int64)
    width = tl.full([ROWS], 2**32, tl.int64)
    for _ in range(KEY_BITS // RADIX_BITS):
        width = width >> RADIX_BITS
        pivots = lo[:, None] + digit[None, :] * width[:, None]
        count = tl.zeros([ROWS, RADIX], dtype=tl.int32)
        for start in range(0, vocab, BLOCK_V):
            key = tl.load(key_ptr + scratch + start)
            count += tl.sum((key[:, None, :] >= pivots[:, :, None]).to(tl.int32), axis=2)
        # Digit RADIX is the bracket's upper end, known to hold fewer than k.
        passed = (count >= top_k[:, None]) & (digit[None, :] < RADIX)
        lo += tl.sum(passed.to(tl.int64), axis=1) * width
    kth_key = lo

    # Pass 2: unnormalised probabilities of the top-k tokens (scratch) and their mass.
    top_k_mass = tl.zeros([ROWS], dtype=tl.float32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + cols0
        ok = row_ok[:, None] & (cols[None, :] < vocab)
        x = tl.load(logits_ptr + base + cols[None, :], mask=ok, other=0.0)
        key = tl.load(key_ptr + scratch + start)
        w = tl.where(key >= kth_key[:, None], tl.exp((x - row_max[:, None]) * inv_temp[:, None]), 0.0)
        tl.store(weight_ptr + scratch + start, w)
        top_k_mass += tl.sum(w, axis=1)

    # Top-p: the kept set is key > lo, for the largest lo whose mass strictly above still
    # reaches top_p·mass (so dropping any kept token would fall short). Same digit search.
    target = top_p * top_k_mass
    lo = tl.full([ROWS], -(2**31), tl.int64)
    width = tl.full([ROWS], 2**32, tl.int64)
    kept_mass = top_k_mass
    for _ in range(KEY_BITS // RADIX_BITS):
        width = width >> RADIX_BITS
        pivots = lo[:, None] + digit[None, :] * width[:, None]
        above = tl.zeros([ROWS, RADIX], dtype=tl.float32)
        for start in range(0, vocab, BLOCK_V):
            key = tl.load(key_ptr + scratch + start)
            w = tl.load(weight_ptr + scratch + start)
            above += tl.sum(tl.where(key[:, None, :] > pivots[:, :, None], w[:, None, :], 0.0), axis=2)
        passed = (above >= target[:, None]) & (digit[None, :] < RADIX)
        steps = tl.sum(passed.to(tl.int64), axis=1)
        # The mass above the new lo: the last pivot that passed (unchanged when none did).
        kept_mass = tl.where(
            steps > 0, tl.sum(tl.where(digit[None, :] == steps[:, None], above, 0.0), axis=1), kept_mass
        )
        lo += steps * width

    # The draw: one uniform from the request's own seed, walked through the kept mass in vocabulary order.
    u = tl.rand(seed, tl.zeros([ROWS], dtype=tl.int32))
    threshold = u * kept_mass
    token = tl.full([ROWS], 2**31 - 1, tl.int32)
    last_kept = tl.zeros([ROWS], dtype=tl.int32)
    carry = tl.zeros([ROWS], dtype=tl.float32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + cols0
        key = tl.load(key_ptr + scratch + start)
        w = tl.load(weight_ptr + scratch + start)
        kept = key > lo[:, None]
        w = tl.where(kept, w, 0.0)
        running = carry[:, None] + tl.cumsum(w, axis=1)
        hit = kept & (running > threshold[:, None])
        token = tl.minimum(token, tl.min(tl.where(hit, cols[None, :], 2**31 - 1), axis=1))
        last_kept = tl.maximum(last_kept, tl.max(tl.where(kept, cols[None, :], 0), axis=1))
        carry += tl.sum(w, axis=1)
    # Rounding can leave the walk a hair short of u·mass: then the last kept token.
    token = tl.where(token == 2**31 - 1, last_kept, token)
    token = tl.where(greedy, arg_max, token)
    tl.store(out_ptr + rows, token.to(tl.int64), mask=row_ok)


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    block_v = min(triton.next_power_of_2(vocab), MAX_BLOCK_V)
    rows = max(1, min(MAX_ROWS, TILE_ELEMENTS // triton.next_power_of_2(vocab)))
    padded_vocab = triton.cdiv(vocab, block_v) * block_v
    padded_rows = triton.cdiv(n_rows, rows) * rows
    keys = torch.empty((padded_rows, padded_vocab), dtype=torch.int32, device=logits.device)
    weights = torch.empty((padded_rows, padded_vocab), dtype=torch.float32, device=logits.device)
    tokens = torch.empty(n_rows, dtype=torch.int64, device=logits.device)
    _sample[(triton.cdiv(n_rows, rows),)](
        logits,
        temperature,
        top_k.to(torch.int32),
        top_p,
        seed,
        keys,
        weights,
        tokens,
        n_rows,
        vocab,
        padded_vocab,
        ROWS=rows,
        BLOCK_V=block_v,
        KEY_BITS=KEY_BITS,
        RADIX_BITS=RADIX_BITS,
        RADIX=2**RADIX_BITS,
        num_warps=8,
    )
    return tokens
