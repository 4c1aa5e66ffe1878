"""Page-table conversions between the task's paged KV cache and what the libraries take.

The task gives each request a row of ``block_table[B, maxp]`` (pool page ids,
columns past the request's last page hold arbitrary ids) and ``seq_lens[B]``.
FlashInfer takes a CSR form instead: ``indptr[B+1]`` into a flat ``indices``
list of the pages each request uses, and ``last_page_len[B]``, the tokens
held by each request's last page. The SDPA baseline gathers each request's
pages into a dense, padded ``[B, L, Hkv, D]`` with a key mask.

These are plain tensor functions (no library import), so their arithmetic is
tested on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PageIndices:
    """FlashInfer's paged-KV description of a batch (all int32, on the block table's device)."""

    indptr: torch.Tensor
    indices: torch.Tensor
    last_page_len: torch.Tensor


def pages_used(seq_lens: torch.Tensor, page_size: int) -> torch.Tensor:
    """Pages each request occupies: ``ceil(seq_len / page_size)`` (int64)."""
    return (seq_lens.long() + page_size - 1) // page_size


def flashinfer_page_indices(block_table: torch.Tensor, seq_lens: torch.Tensor, page_size: int) -> PageIndices:
    """``block_table``/``seq_lens`` → ``indptr``, ``indices``, ``last_page_len``."""
    pages = pages_used(seq_lens, page_size)
    width = block_table.shape[1]
    if bool((pages > width).any()):
        raise ValueError(f"a request needs more pages than the block table's {width} columns")
    indptr = torch.zeros(len(pages) + 1, dtype=torch.int64, device=block_table.device)
    indptr[1:] = torch.cumsum(pages, 0)
    used = torch.arange(width, device=block_table.device)[None, :] < pages[:, None]
    # Boolean indexing walks the table row by row: the pages of request 0, then request 1, ...
    indices = block_table[used]
    last = seq_lens.long() - (pages - 1) * page_size
    last_page_len = torch.where(pages > 0, last, torch.zeros_like(last))
    return PageIndices(indptr.to(torch.int32), indices.to(torch.int32), last_page_len.to(torch.int32))


def gather_pages(cache: torch.Tensor, block_table: torch.Tensor, max_len: int) -> torch.Tensor:
    """Each request's first ``max_len`` token slots of ``cache[P, page, Hkv, D]`` → ``[B, max_len, Hkv, D]``.

    Slots past a request's own length hold whatever its table points at; the key mask hides them.
    """
    page_size = cache.shape[1]
    n_pages = (max_len + page_size - 1) // page_size
    pages = cache[block_table[:, :n_pages].long()]
    return pages.flatten(1, 2)[:, :max_len]


def key_mask(seq_lens: torch.Tensor, max_len: int) -> torch.Tensor:
    """``[B, max_len]`` bool: True where the slot holds one of the request's tokens."""
    return torch.arange(max_len, device=seq_lens.device)[None, :] < seq_lens.long()[:, None]
