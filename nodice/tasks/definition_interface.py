"""What one FlashInfer-Bench interface is to nodice: an :class:`Adapter` onto a catalog task.

An adapter turns a catalog task's arguments into a definition's named inputs and the definition's
outputs back into the task's output (a reshape where one suffices). The helpers here are what
several adapters share: the CSR page lists FlashInfer's paged kernels take where the catalog tasks
take a block table, and the two ways a definition's outputs become the task's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from nodice.errors import EntryPointError
from nodice.tasks.base import Output

# The definition's const axes, by name.
Consts = Mapping[str, int]


@dataclass(frozen=True)
class Adapter:
    """How one interface of an op_type maps onto a catalog task (a reshape where possible).

    An op_type may have several interfaces (``rmsnorm`` with and without ``residual``, ``gqa_paged``
    decode and prefill): the definition's inputs pick the adapter, in the order of its op_type's list.
    """

    task: str
    # The definition's variable axis that is the batch (a sample is one index of it).
    batch_axis: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    # The task's arguments as the definition's inputs, by name, given the definition's const axes.
    to_definition: Callable[[tuple[Any, ...], Consts], dict[str, Any]]
    # The definition's outputs (in its order) as the task's output, given the task's arguments.
    from_definition: Callable[[tuple[torch.Tensor, ...], tuple[Any, ...]], Output]
    # Which interface of the op_type this is, for messages ("decode, pages of any size").
    kind: str = ""
    # Task dimension -> the definition's const axis that fixes it.
    const_dims: dict[str, str] = field(default_factory=dict)
    # Task workload parameter -> the definition's variable axis it is (for the Trace's workload axes).
    var_dims: dict[str, str] = field(default_factory=dict)
    # Keys of a context's problem variant that the definition fixes (they are dropped from the variant).
    fixed_variant_keys: tuple[str, ...] = ()
    # Const axes whose value the task fixes: axis -> (the value nodice adapts, why).
    required_consts: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The definition's second output ``lse`` is judged as a second output of the task.
    judges_lse: bool = False
    # Workload parameters derived from the task's (a definition's variable axis that is no task parameter).
    derived_params: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Trailing outputs a definition may leave out (any name): ``supply`` makes them from the task's
    # arguments before the solution runs (it might write into its inputs), named as ``supplied_outputs``
    # says; only the definition's own outputs are the solution's.
    optional_outputs: int = 0
    supplied_outputs: tuple[str, ...] = ()
    supply: Callable[[tuple[Any, ...]], tuple[torch.Tensor, ...]] | None = None
    # The task's arguments in the definition's words (None: no one input is that argument).
    argument_names: tuple[str | None, ...] = ()
    # The definition draws from torch's global generator (no per-request seed input): the gate seeds it
    # from the first request's seed before every call and judges the target first in its batch.
    shared_rng: bool = False
    # Why the definition's const axes are sizes this interface cannot have ("" when they can): a rule of
    # the operation itself (MoE routes each token to top_k of its experts), checked when it is read.
    refuse_sizes: Callable[[Consts], str] | None = None

    def accepts(self, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> bool:
        """The definition's inputs are this interface's; its outputs too, optional ones aside."""
        required = len(self.outputs) - self.optional_outputs
        return (
            inputs == self.inputs
            and required <= len(outputs) <= len(self.outputs)
            and outputs[:required] == self.outputs[:required]
        )

    def interface(self) -> str:
        outs = list(self.outputs[: len(self.outputs) - self.optional_outputs])
        if self.optional_outputs:
            outs.append(f"[{', '.join(self.outputs[len(outs) :])}]")
        return f"{self.kind + ': ' if self.kind else ''}{list(self.inputs)} -> [{', '.join(outs)}]"


def single(outs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> Output:
    return outs[0]


def with_lse(outs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output, lse)``: both are judged (against the definition's reference, and for invariance)."""
    if len(outs) != 2:
        raise EntryPointError(
            f"the entry returned {len(outs)} tensor(s); the definition's outputs are (output, lse) and "
            "nodice judges both: return both, or write both under destination-passing style"
        )
    return outs[0], outs[1]


def cdiv(a: torch.Tensor, b: int) -> torch.Tensor:
    return (a + b - 1) // b


def page_lists(
    block_table: torch.Tensor, seq_lens: torch.Tensor, page: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A block table as FlashInfer's CSR page lists: ``kv_indptr = [0, cumsum(pages)]``, ``kv_indices``
    (each row's used pages, in order) and ``kv_last_page_len`` (tokens on each request's last page)."""
    lens = seq_lens.long()
    pages = cdiv(lens, page)
    kv_indptr = torch.zeros(len(lens) + 1, dtype=torch.int32, device=block_table.device)
    kv_indptr[1:] = torch.cumsum(pages, 0).to(torch.int32)
    used = torch.arange(block_table.shape[1], device=block_table.device)[None, :] < pages[:, None]
    last = (lens - (pages - 1) * page).to(torch.int32)
    return kv_indptr, block_table[used].to(torch.int32), last


def packed_pages(
    k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, page: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed keys and values ``[total, heads, D]`` as a paged cache: ``(k_cache, v_cache, kv_indptr,
    kv_indices, kv_last_page_len)``.

    Each sequence gets its own pages, and the pool holds them in reverse order (the last sequence's
    pages first), so that ``kv_indices`` is no identity a kernel could skip; the tail of a last page
    is zero (a kernel that reads it into its softmax is wrong).
    """
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long().cpu()
    pages = cdiv(lens, page)
    pool = int(pages.sum())
    first_page = torch.cumsum(pages, 0) - pages
    # Token t of sequence i sits on the sequence's page t // page, at offset t % page.
    seq = torch.repeat_interleave(torch.arange(len(lens)), lens)
    offset = torch.arange(int(lens.sum())) - torch.repeat_interleave(cu_seqlens[:-1].long().cpu(), lens)
    slot = pool - 1 - (first_page[seq] + offset // page)
    rows = (slot * page + offset % page).to(k.device)
    caches = []
    for t in (k, v):
        cache = torch.zeros((pool * page, *t.shape[1:]), dtype=t.dtype, device=t.device)
        cache[rows] = t
        caches.append(cache.view(pool, page, *t.shape[1:]))
    kv_indptr = torch.zeros(len(lens) + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(pages, 0).to(torch.int32)
    kv_indices = (pool - 1 - torch.arange(pool)).to(torch.int32)
    last = (lens - (pages - 1) * page).to(torch.int32)
    dev = k.device
    return caches[0], caches[1], kv_indptr.to(dev), kv_indices.to(dev), last.to(dev)
