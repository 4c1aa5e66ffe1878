"""A definition's sizes on its catalog task: problems and workloads at the definition's const axes.

The catalog tasks draw their own sizes (small ones on CPU); a FlashInfer-Bench definition fixes
some of them (hidden size, heads, head dim, page size, vocabulary, experts …), on CPU too. Each
catalog task takes them its own way: most through ``problem(**variant)``; the GEMM's weight and
the paged decode's layout are built here.

Before any of it is drawn, :func:`input_sizes` gives the bytes of the definition's inputs by
arithmetic on its axes (nothing is allocated) and :func:`refuse_unless_fits` refuses a definition
whose batch the gate cannot hold in the device's memory (a const axis of 10**12), in one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from nodice.errors import DefinitionError
from nodice.tasks._attention import draw_sm_scale
from nodice.tasks.base import Problem, Workload, element_size, randn
from nodice.tasks.definition_interface import Adapter
from nodice.tasks.reference_file import BATCHES_HELD, gb, too_large

# attention_decode's and attention_varlen's own CPU and GPU length ranges for a problem's requests.
_DECODE_LENGTHS = {"cpu": (17, 64), "cuda": (200, 3000)}
_VARLEN_LENGTHS = {"cpu": (9, 40), "cuda": (100, 700)}


def linear_weight(
    k: int, n: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """gemm's b[K, N] as the transposed view of a contiguous [N, K] weight (the definition's B)."""
    return randn((n, k), gen, device, dtype, scale=1.0 / math.sqrt(k)).t()


def definition_problem(
    task: str,
    catalog: Callable[..., Problem],
    pinned: dict[str, int],
    layout: str,
    gen: torch.Generator,
    device: torch.device,
    dtype: torch.dtype,
    variant: dict[str, Any],
) -> Problem:
    """The catalog task's problem with the definition's sizes; ``catalog`` is the task's own ``problem``."""
    p = pinned
    if task == "gemm":
        k, n = p["K"], p["N"]
        return Problem(device, dtype, {"K": k, "N": n}, {"b": linear_weight(k, n, gen, device, dtype)})
    if task == "attention_decode":
        lengths = variant.get("lengths") or _DECODE_LENGTHS[device.type]
        dims = {"layout": layout, **p, "lengths": tuple(lengths)}
        return Problem(device, dtype, dims, {"sm_scale": draw_sm_scale(gen, p["D"])})
    if task == "attention_varlen":
        # FlashInfer-Bench's prefill definitions are causal.
        lengths = variant.get("lengths") or _VARLEN_LENGTHS[device.type]
        dims = {"layout": layout, **p, "causal": True, "lengths": tuple(lengths)}
        return Problem(device, dtype, dims, {"causal": True, "sm_scale": draw_sm_scale(gen, p["D"])})
    if task == "mla_decode":
        return catalog(gen, device, dtype, heads=p["H"], page=p["page"], lengths=variant.get("lengths"))
    if task == "dsa":
        fixed = {"heads": p["H"], "page": p["page"], "topk": p["topk"]}
        problem = catalog(gen, device, dtype, **{**variant, **fixed})
        problem.dims.update(d_v=p["d_v"], d_rope=p["d_rope"])
        return problem
    return catalog(gen, device, dtype, **p)


def definition_workload_inputs(
    task: str,
    catalog: Callable[..., tuple[Any, ...]],
    workload: Workload,
    gen: torch.Generator,
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[Any, ...]:
    if task == "gemm":
        m, k, n = (workload.params[d] for d in ("M", "K", "N"))
        return (randn((m, k), gen, device, dtype), linear_weight(k, n, gen, device, dtype))
    return catalog(workload, gen, device, dtype)


def _varlen_axes(params: dict[str, Any], page: int | None) -> dict[str, Any]:
    """A packed batch's variable axes: tokens, offsets' length and, when paged, its pages."""
    lengths = [int(n) for n in params["lengths"]]
    out = {
        "total_q": sum(lengths),
        "total_kv": sum(lengths),
        "len_indptr": len(lengths) + 1,
        "B": len(lengths),
    }
    if page is not None:
        pages = sum(math.ceil(n / page) for n in lengths)
        out.update(num_pages=pages, num_kv_indices=pages)
    return out


def pin_workloads(workloads: list[Workload], pinned: dict[str, int], adapter: Adapter) -> list[Workload]:
    """The catalog task's workloads at the definition's sizes, each shape once, with the definition's
    variable axes the task's parameters give (for the traces' ``workload.axes``)."""
    seen, out = set(), []
    for w in workloads:
        params = {**w.params, **pinned}
        if adapter.derived_params is not None:
            params.update(adapter.derived_params(params))
        if adapter.task == "attention_varlen":
            params.update(_varlen_axes(params, params.get("page")))
        key = repr(sorted(params.items()))
        if key not in seen:
            seen.add(key)
            out.append(Workload(w.name, params, w.model))
    return out


@dataclass(frozen=True)
class InputSize:
    """One tensor input of a definition: its shape, axis by axis, and the dtype the gate holds it in."""

    name: str
    axes: tuple[tuple[str, int], ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(size for _, size in self.axes) * element_size(self.dtype)

    def words(self) -> str:
        shape = ", ".join(f"{axis}={size}" for axis, size in self.axes)
        return f"{self.name}[{shape}] {str(self.dtype).removeprefix('torch.')} {gb(self.nbytes)}"


def input_sizes(
    definition: Any, var_values: Mapping[str, int], dtype_of: Callable[[str], torch.dtype]
) -> list[InputSize]:
    """The definition's tensor inputs at its const axes and ``var_values``, by arithmetic (nothing is
    allocated); a variable axis not given is 1, so the sizes are the least a batch can take.
    ``dtype_of``: the dtype the gate holds an input of a declared dtype in."""
    consts = definition.const_axes
    sizes = []
    for name, spec in definition.inputs.items():
        if spec.shape is None:  # a scalar, passed as a number
            continue
        axes = tuple((a, int(consts[a]) if a in consts else int(var_values.get(a, 1))) for a in spec.shape)
        sizes.append(InputSize(name, axes, dtype_of(spec.dtype.value)))
    return sizes


def refuse_unless_fits(
    definition: str, sizes: list[InputSize], batch: str, available: int | None, where: str
) -> None:
    """A :class:`DefinitionError` naming the largest inputs when the gate cannot hold ``BATCHES_HELD``
    batches of ``sizes`` (``batch``: which batch they are) in the ``available`` bytes ``where``."""
    total = sum(s.nbytes for s in sizes)
    if available is None or not too_large(total, available):
        return
    ranked = sorted(sizes, key=lambda s: s.nbytes, reverse=True)
    named = [s for s in ranked if 100 * s.nbytes >= total][:3]  # the inputs that make the size
    rest = len(ranked) - len(named)
    items = "; ".join(s.words() for s in named) + (f"; {rest} smaller" if rest else "")
    raise DefinitionError(
        f"definition {definition}: its inputs take at least {gb(total)} in {batch} ({items}) and the "
        f"gate holds about {BATCHES_HELD} such batches, more than the {gb(available)} {where}"
    )
