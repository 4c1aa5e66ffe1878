"""``"paged|nodice"``: attention inside transformers' continuous batching (``generate_batch``).

One call sees a whole step: every scheduled request's new tokens packed back to back
(``q[1,Hq,T,D]``, ``k/v[1,Hkv,T,D]``), their cumulative query and key lengths, and the paged
cache with the slots to write (``write_index``) and, per request, the slots of its whole
context (``read_index``). The call writes the new keys and values into the cache, then:

* **prompt tokens** (a prefill chunk of any length, including a one-token chunk) go through
  ``attention_varlen`` over the request's context gathered from the cache, causal aligned
  bottom-right. A query row's arithmetic there depends on its own row, its own keys and the
  fixed key tiles counted from the request's first key, never on where the chunk starts, so a
  prompt gives the same bits however the scheduler chunks it;
* **generated tokens** (a decode step, recognised through the scheduler's ledger, see
  :mod:`~nodice.integrations.transformers.batches`) go through the paged ``attention_decode``
  kernel, straight over the cache pages (a block table built from ``read_index``), with its
  split size fixed by the request's own length.

A step of decoding requests only comes the way transformers' decode fast path sends it (nodice
turns that path on for ``paged|nodice``, see :mod:`~nodice.integrations.transformers.registry`):
a block table per request and the key lengths on the device, and nothing on the host. Such a
step writes the new keys and values through the block table and runs the same
``attention_decode`` kernel, whose grid follows the table's width and whose split count each
program reads from its own request's length: no host sync, so transformers can capture the step
as a CUDA graph and replay it for any requests of that padded batch size. The bits are those of
the ledger path (same kernel, same split rule; only addresses and idle programs differ).

A token is never sent to the other kernel because of what else is in the step. Without the
ledger (asynchronous batching, another scheduler) generated tokens go through
``attention_varlen`` too: still invariant, slower. Calls the kernels do not cover (a dtype or
head dim the gate did not validate) run a per-request PyTorch path, counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from nodice.integrations.transformers.batches import LEDGER
from nodice.integrations.transformers.kernels import KernelSet, kernels_for


class PagedAttentionError(ValueError):
    """``paged|nodice`` was called where it cannot run (no paged cache, a CUDA graph, a sliding window)."""


def _check(module: Any, cache: Any, q: torch.Tensor, *, table: bool = False) -> None:
    if cache is None:
        raise PagedAttentionError("paged|nodice needs the paged cache of continuous batching (use 'nodice')")
    if getattr(module, "sliding_window", None):
        raise PagedAttentionError("paged|nodice does not cover sliding-window attention")
    if not table and _capturing(q):
        raise PagedAttentionError(
            "paged|nodice captures decode steps only (the block-table path): use_cuda_graph=(False, True)"
        )


def _capturing(t: torch.Tensor) -> bool:
    return t.device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _single(value: Any) -> Any:
    """The full-attention entry of a per-layer-type dict, or the value itself."""
    return value["full_attention"] if isinstance(value, dict) else value


def paged_nodice_attention(
    module: torch.nn.Module,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attention_mask: Any,
    cache: Any = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: Any = None,
    max_seqlen_q: int = 0,
    max_seqlen_k: Any = 0,
    read_index: list[torch.Tensor] | None = None,
    write_index: list[torch.Tensor] | None = None,
    block_table: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    _check(module, cache, q, table=block_table is not None)
    if block_table is not None:
        return _decode_step(module, q, k, v, cache, _single(cu_seq_lens_k), block_table).unsqueeze(0), None
    assert cu_seq_lens_q is not None and read_index is not None and write_index is not None
    ks = kernels_for(q.device)
    group, in_group = cache.layer_index_to_group_indices[module.layer_idx]
    k_pool, v_pool = cache.key_cache[in_group], cache.value_cache[in_group]  # [slots, Hkv, D]
    reads, writes = read_index[group], write_index[group]
    step = _step(cu_seq_lens_q, _single(cu_seq_lens_k), reads)
    cu_q, cu_k = step.cu_q, step.cu_k
    scale = float(getattr(module, "scaling", q.shape[-1] ** -0.5))

    q_tok = q[0].transpose(0, 1)  # [T, Hq, D]
    new_k, new_v = k[0].transpose(0, 1), v[0].transpose(0, 1)  # [T, Hkv, D]
    k_pool.index_copy_(0, writes, new_k)
    v_pool.index_copy_(0, writes, new_v)
    out = torch.empty_like(q_tok)

    decoding = step.decoding
    reason = ks.refuse("attention_varlen", q_tok, new_k, new_v)
    if reason is not None:
        ks.count("paged").fell_back(reason)
        _torch_paged(out, q_tok, k_pool, v_pool, reads, cu_q, cu_k, new_k, new_v, scale)
        return out.unsqueeze(0), None
    ks.count("paged").routed += 1
    layer = _Layer(q_tok, k_pool, v_pool, reads, out, scale)
    prefill = [i for i, d in enumerate(decoding) if not d]
    if prefill:
        _prefill(ks, step, layer, prefill, new_k, new_v)
    decode = [i for i, d in enumerate(decoding) if d]
    if decode:
        whole = _decode(ks, step, layer, decode, cache.block_size)
        if whole is not None:
            return whole.unsqueeze(0), None
    return out.unsqueeze(0), None


@dataclass
class _Step:
    """What every layer of one forward shares: the lengths on the host, which requests decode, and the
    index tensors built from them (once per forward, not once per layer: each costs a host sync)."""

    cu_q: list[int]
    cu_k: list[int]
    k_lens: list[int]
    decoding: list[bool]
    memo: dict[Any, torch.Tensor] = field(default_factory=dict)

    def tensor(self, key: Any, build: Callable[[], torch.Tensor]) -> torch.Tensor:
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]


@dataclass(frozen=True)
class _Layer:
    """One layer's call: its queries, its cache pool, the step's read slots, the output to fill."""

    q: torch.Tensor  # [T, Hq, D]
    k_pool: torch.Tensor  # [slots, Hkv, D]
    v_pool: torch.Tensor
    reads: torch.Tensor
    out: torch.Tensor
    scale: float


_LAST: list[tuple[tuple[int, ...], _Step]] = []


def _step(cu_seq_lens_q: torch.Tensor, cu_seq_lens_k: torch.Tensor, reads: torch.Tensor) -> _Step:
    """This forward's step, from the first layer's call; the tensors' storage and version identify it,
    with the ledger's count of scheduled batches (a later loop's tensors may reuse the addresses and
    reach the same versions)."""
    tensors = (cu_seq_lens_q, cu_seq_lens_k, reads)
    key = (LEDGER.generation, *(v for t in tensors for v in (t.data_ptr(), t._version, t.numel())))
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    cu_q = [int(x) for x in cu_seq_lens_q.tolist()]
    cu_k = [int(x) for x in cu_seq_lens_k.tolist()]
    q_lens = [b - a for a, b in itertools.pairwise(cu_q)]
    batch = LEDGER.batch_for(q_lens)
    real = LEDGER.size()
    if batch is None and 0 < real < len(q_lens) and not any(q_lens[real:]):
        # Padded inputs (transformers pads when any path runs as a CUDA graph): sequences past the
        # scheduled ones are empty; they are dropped, and the tokens past them get no output.
        batch = LEDGER.batch_for(q_lens[:real])
        if batch is not None:
            cu_q, cu_k, q_lens = cu_q[: real + 1], cu_k[: real + 1], q_lens[:real]
    decoding = [batch is not None and batch[i].decoding and q_lens[i] == 1 for i in range(len(q_lens))]
    step = _Step(cu_q, cu_k, [b - a for a, b in itertools.pairwise(cu_k)], decoding)
    _LAST[:] = [(key, step)]
    return step


def _ranges(starts: list[int], lens: list[int], device: torch.device) -> torch.Tensor:
    idx = [s + j for s, n in zip(starts, lens, strict=True) for j in range(n)]
    return torch.tensor(idx, dtype=torch.int64, device=device)


def _cumulative(lens: list[int], device: torch.device) -> torch.Tensor:
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


def _prefill(
    ks: KernelSet, step: _Step, layer: _Layer, chosen: list[int], new_k: torch.Tensor, new_v: torch.Tensor
) -> None:
    """``attention_varlen`` over the chosen requests' prompt tokens and their gathered contexts."""
    q_tok, k_pool, v_pool, reads, out = layer.q, layer.k_pool, layer.v_pool, layer.reads, layer.out
    dev, cu_q, cu_k = q_tok.device, step.cu_q, step.cu_k
    ks.count("prefill").routed += 1
    q_lens = [cu_q[i + 1] - cu_q[i] for i in chosen]
    k_lens = [cu_k[i + 1] - cu_k[i] for i in chosen]
    every = len(chosen) == len(cu_q) - 1 and cu_q[-1] == q_tok.shape[0]  # every token, no padding rows
    which = tuple(chosen)
    rows = (
        None
        if every
        else step.tensor(("rows", which), lambda: _ranges([cu_q[i] for i in chosen], q_lens, dev))
    )
    q_sub = q_tok if rows is None else q_tok.index_select(0, rows)
    if reads.numel() == 0:  # nothing cached yet: every request is a whole prompt, keys = new tokens
        k_sub = new_k if rows is None else new_k.index_select(0, rows)
        v_sub = new_v if rows is None else new_v.index_select(0, rows)
    else:
        slots = (
            reads
            if every
            else step.tensor(
                ("slots", which),
                lambda: reads.index_select(0, _ranges([cu_k[i] for i in chosen], k_lens, dev)),
            )
        )
        k_sub, v_sub = k_pool.index_select(0, slots), v_pool.index_select(0, slots)
    fn = ks.fn("attention_varlen")
    assert fn is not None
    o = fn(
        q_sub.contiguous(),
        k_sub.contiguous(),
        v_sub.contiguous(),
        step.tensor(("cu_q", which), lambda: _cumulative(q_lens, dev)),
        step.tensor(("cu_k", which), lambda: _cumulative(k_lens, dev)),
        max(q_lens),
        max(k_lens),
        True,
        layer.scale,
    )
    if rows is None:
        out.copy_(o)
    else:
        out.index_copy_(0, rows, o)


def _decode(ks: KernelSet, step: _Step, layer: _Layer, chosen: list[int], page: int) -> torch.Tensor | None:
    """The paged ``attention_decode`` kernel for the chosen requests' one generated token each.

    When every token of the step is one of them, in order (a step of decoding requests only), the
    kernel's output is the layer's output and is returned: no gather of the queries, no scatter of
    the result. Otherwise it is written into ``layer.out`` and None returned."""
    q_tok, k_pool, v_pool, reads = layer.q, layer.k_pool, layer.v_pool, layer.reads
    dev = q_tok.device
    reason = ks.refuse("attention_decode", q_tok, k_pool, v_pool)
    if reason is not None:
        # Same arithmetic for the token alone or batched, just not the decode kernel's (the new
        # tokens are not read: a decoding request's context comes from the cache).
        ks.count("decode").fell_back(reason)
        _prefill(ks, step, layer, chosen, q_tok, q_tok)
        return None
    ks.count("decode").routed += 1
    lens = [step.k_lens[i] for i in chosen]

    def block_table() -> torch.Tensor:
        width = max(-(-n // page) for n in lens)
        # A request's page j holds its tokens j·page …: read_index at that token gives the page's slot.
        first_token = [
            [step.cu_k[i] + min(j, -(-n // page) - 1) * page for j in range(width)]
            for i, n in zip(chosen, lens, strict=True)
        ]
        where = torch.tensor(first_token, dtype=torch.int64, device=dev)
        return (reads[where] // page).to(torch.int32)

    table = step.tensor("block_table", block_table)
    # One token per request, all decoding, and no padding tokens after them.
    whole = len(chosen) == len(step.cu_q) - 1 == step.cu_q[-1] == q_tok.shape[0]
    rows = (
        None
        if whole
        else step.tensor("decode_rows", lambda: torch.tensor([step.cu_q[i] for i in chosen], device=dev))
    )
    seq_lens = step.tensor("seq_lens", lambda: torch.tensor(lens, dtype=torch.int32, device=dev))
    heads, dim = k_pool.shape[1], k_pool.shape[2]
    fn = ks.fn("attention_decode")
    assert fn is not None
    o = fn(
        (q_tok if rows is None else q_tok.index_select(0, rows)).contiguous(),
        k_pool.view(-1, page, heads, dim),
        v_pool.view(-1, page, heads, dim),
        table,
        seq_lens,
        layer.scale,
    )
    if rows is None:
        return o
    layer.out.index_copy_(0, rows, o)
    return None


def _decode_step(
    module: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache: Any,
    cu_seq_lens_k: torch.Tensor,
    block_table: torch.Tensor,
) -> torch.Tensor:
    """A step of decoding requests only, as transformers' decode fast path hands it over: one new
    token per request, ``block_table[group]`` ``[requests, blocks]`` (``-1`` past a request's
    blocks and on padding rows) and the key lengths as cumulative sums on the device, padding
    requests adding none. Nothing is read on the host, so the step can be captured."""
    ks = kernels_for(q.device)
    group, in_group = cache.layer_index_to_group_indices[module.layer_idx]
    k_pool, v_pool = cache.key_cache[in_group], cache.value_cache[in_group]  # [slots, Hkv, D]
    page = cache.block_size
    scale = float(getattr(module, "scaling", q.shape[-1] ** -0.5))
    q_tok = q[0].transpose(0, 1)  # [B, Hq, D]: B tokens, one per request (padded)
    new_k, new_v = k[0].transpose(0, 1), v[0].transpose(0, 1)
    table = block_table[group]
    n_req = table.shape[0]
    lens = (cu_seq_lens_k[1 : n_req + 1] - cu_seq_lens_k[:n_req]).to(torch.int32)  # the new token included
    # The new token's slot: its request's page at position len - 1; padding writes to the trash.
    pos = (lens - 1).clamp(min=0).to(torch.int64)
    block = table.gather(1, (pos // page).unsqueeze(1)).squeeze(1).to(torch.int64)
    slot = torch.where((lens > 0) & (block >= 0), block * page + pos % page, cache.write_trash_index)
    if q_tok.shape[0] > n_req:  # more padded tokens than requests: theirs go to the trash too
        slot = torch.cat([slot, slot.new_full((q_tok.shape[0] - n_req,), cache.write_trash_index)])
    k_pool.index_copy_(0, slot, new_k)
    v_pool.index_copy_(0, slot, new_v)
    reason = ks.refuse("attention_decode", q_tok, k_pool, v_pool)
    stats = ks.count("decode_table")
    if reason is not None:
        if _capturing(q):
            raise PagedAttentionError(f"paged|nodice cannot capture this decode step: {reason}")
        stats.fell_back(reason)
        return _as_packed(module, q, k, v, cache, table, lens, slot, group)
    stats.routed += 1
    heads, dim = k_pool.shape[1], k_pool.shape[2]
    fn = ks.fn("attention_decode")
    assert fn is not None
    o: torch.Tensor = fn(
        q_tok[:n_req].contiguous(),
        k_pool.view(-1, page, heads, dim),
        v_pool.view(-1, page, heads, dim),
        table.contiguous(),
        lens,
        scale,
    )
    # Padding requests (length 0) get no program's output; their rows are never read.
    if q_tok.shape[0] > n_req:
        o = torch.cat([o, o.new_zeros((q_tok.shape[0] - n_req, *o.shape[1:]))])
    return o


def _as_packed(
    module: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache: Any,
    table: torch.Tensor,
    lens: torch.Tensor,
    slot: torch.Tensor,
    group: int,
) -> torch.Tensor:
    """A decode step the decode kernel does not take, through the packed path with the step's
    lengths and slots on the host: its tokens get the arithmetic a generated token gets in a mixed
    step (outside a capture only)."""
    page = cache.block_size
    n = [int(x) for x in lens.tolist()]
    real = sum(1 for x in n if x > 0)  # padding requests come last
    reads: list[int] = []
    for i in range(real):
        blocks = table[i].tolist()
        reads += [blocks[t // page] * page + t % page for t in range(n[i])]
    dev = q.device
    cu = torch.tensor([0, *itertools.accumulate(n[:real])], dtype=torch.int32, device=dev)
    # The packed path reads its group's entry of each list.
    read_index = [torch.tensor(reads, dtype=torch.int64, device=dev)] * (group + 1)
    write_index = [slot[:real]] * (group + 1)
    out, _ = paged_nodice_attention(
        module,
        q[:, :, :real],
        k[:, :, :real],
        v[:, :, :real],
        None,
        cache,
        torch.arange(real + 1, dtype=torch.int32, device=dev),
        cu,
        read_index=read_index,
        write_index=write_index,
    )
    full = out.new_zeros((1, q.shape[2], *out.shape[2:]))
    full[:, :real] = out
    return full[0]


def _torch_paged(
    out: torch.Tensor,
    q_tok: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    reads: torch.Tensor,
    cu_q: list[int],
    cu_k: list[int],
    new_k: torch.Tensor,
    new_v: torch.Tensor,
    scale: float,
) -> None:
    """Request by request with SDPA and an explicit bottom-right causal mask: for what no kernel takes."""
    for i in range(len(cu_q) - 1):
        qs, qe, kstart, ke = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        if reads.numel() == 0:
            keys, values = new_k[qs:qe], new_v[qs:qe]
        else:
            slots = reads[kstart:ke]
            keys, values = k_pool.index_select(0, slots), v_pool.index_select(0, slots)
        n_q, n_k = qe - qs, ke - kstart
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=q_tok.device).tril(n_k - n_q)
        o = F.scaled_dot_product_attention(
            q_tok[qs:qe].transpose(0, 1).unsqueeze(0),
            keys.transpose(0, 1).unsqueeze(0),
            values.transpose(0, 1).unsqueeze(0),
            attn_mask=mask,
            scale=scale,
            enable_gqa=True,
        )
        out[qs:qe] = o[0].transpose(0, 1)
