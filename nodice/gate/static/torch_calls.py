"""PyTorch calls: allocation, reductions over the batch axis, random numbers, routing, scatter-adds.

Tensors carry data, not batch quantities: a tensor is tainted only when its
*values* depend on the batch context — a statistic over the batch axis, positions
(``arange(B)``), or arithmetic with a batch-dependent scalar. Shapes built from
the batch size make a tensor whose first axis is the batch axis, nothing more.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

import nodice.gate.static.nn_modules as nn_modules
import nodice.gate.static.per_sample as per_sample
import nodice.gate.static.tiles as tiles
from nodice.gate.static.expressions import shape_item, shape_value
from nodice.gate.static.precision import DTYPE_FROM_BATCH, dtype_step
from nodice.gate.static.torch_dtypes import METHOD_DTYPES, converted_to, exact_reduction, is_integral
from nodice.gate.static.torch_sinks import TorchSinksMixin
from nodice.gate.static.values import V, deep_taint, extend, first_taint, int_const

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

ALLOC = {
    "empty",
    "zeros",
    "ones",
    "full",
    "empty_strided",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
}
NEW_ALLOC = {"new_empty", "new_zeros", "new_ones", "new_full"}
REDUCTIONS = {
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "topk",
    "sort",
    "argsort",
    "unique",
    "bincount",
    "nonzero",
    "count_nonzero",
    "cumsum",
    "cumprod",
    "histc",
    "std",
    "var",
    "norm",
    "logsumexp",
    "prod",
    "any",
    "all",
    "median",
    "mode",
    "kthvalue",
    "quantile",
    "nansum",
    "aminmax",
}
ROUTING_PER_ROW = {"softmax", "log_softmax"}
RNG_DRAWS = {
    "rand",
    "randn",
    "randint",
    "rand_like",
    "randn_like",
    "randint_like",
    "randperm",
    "multinomial",
    "bernoulli",
    "normal",
    "poisson",
    "exponential_",
    "uniform_",
    "normal_",
    "bernoulli_",
    "random_",
    "geometric_",
    "cauchy_",
    "log_normal_",
}
SEEDING = {"manual_seed", "seed", "manual_seed_all"}
# Library kernels that choose their algorithm (split-K, tiles, backend) from the operands' shapes.
SHAPE_TUNED = {"mm", "matmul", "bmm", "addmm", "baddbmm", "linear", "einsum", "scaled_dot_product_attention"}
# Convolutions: cuDNN (oneDNN on a CPU) picks the algorithm from the input's shape, batch included.
CONVOLUTIONS = {
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
}
SCATTER_ACCUMULATE = {
    "index_add_",
    "index_add",
    "scatter_add_",
    "scatter_add",
    "index_put_",
    "scatter_reduce_",
}
ARITH = {
    "add",
    "sub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "pow",
    "clamp",
    "clamp_min",
    "clamp_max",
    "fill_",
    "full",
    "full_like",
    "masked_fill",
    "masked_fill_",
    "where",
    "lerp",
    "addcmul",
    "addcdiv",
    "remainder",
    "fmod",
    "add_",
    "sub_",
    "mul_",
    "div_",
    "arange",
    "linspace",
    "mul_scalar",
    "scale",
}
_SAME_SHAPE = {"contiguous", "float", "half", "bfloat16", "to", "clone", "detach", "type", "cuda", "cpu"}
META = {
    "dim",
    "ndimension",
    "stride",
    "element_size",
    "data_ptr",
    "is_contiguous",
    "get_device",
    "storage_offset",
}


# The trace step of a reduction over a piece whose extent the batch decided.
PARTIAL_RESULT = "a partial result"
# Calls that cut a tensor into pieces along one axis: (count or size argument names, dim default 0).
PIECES = {"chunk", "split", "tensor_split"}
_PIECE_ARGS = ("chunks", "split_size_or_sections", "split_size", "sections", "indices_or_sections", "indices")


def _batch_axis_of_shape(args: list[V]) -> int:
    """Which axis of ``empty((P, M, N))`` / ``empty(P, M, N)`` has the batch-dependent size (the
    first one; 0 when none is known): ``torch.empty((k_parts, M, N)).sum(0)`` sums the parts."""
    sizes = args[0].items if args and args[0].kind in ("seq", "shape") and args[0].items else args
    for i, v in enumerate(sizes):
        if v.taint is not None or (v.kind == "shape" and v.batch is not None):
            return i
    return 0


class TorchMixin(TorchSinksMixin):
    an: Analysis
    mod: ModuleInfo
    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def in_sample_loop(self) -> int | None: ...

        def src(self, node: ast.AST) -> str: ...

    seeded_loops: set[int]

    # ---- helpers ---------------------------------------------------------------
    def _batch_of(self, values: list[V]) -> tuple[Any, int, int | None]:
        for v in values:
            if v.kind == "tensor" and v.batch is not None:
                return v.batch, v.baxis, v.rank
        return None, 0, None

    def _size_batch(self, values: list[V], node: ast.AST) -> Any:
        """A shape argument ``(B, H)`` or ``B, H`` that contains a batch-dependent size."""
        for v in values:
            if v.taint is not None:
                return v.taint
            if v.kind in ("seq", "shape") and v.items:
                t = first_taint(*v.items)
                if t is not None:
                    return t
            if v.kind == "shape" and v.batch is not None:
                return v.batch
        return None

    def tensor_result(self, values: list[V], node: ast.AST, arith: bool) -> V:
        batch, baxis, rank = self._batch_of(values)
        tensors = [v for v in values if v.kind == "tensor"]
        taint = first_taint(*tensors)
        if arith and taint is None:
            taint = first_taint(*[v for v in values if v.kind not in ("tensor", "seq", "shape")])
        # Elementwise work keeps the operands' axes whose extent depends on the batch (a piece of a
        # per-sample axis cut by the batch size stays that piece).
        ctx = tuple(sorted({a for v in tensors if v.rank == rank for a in v.ctx}))
        cut = next((v.cut for v in tensors if v.rank == rank and v.ctx), None) if ctx else None
        return V(taint=taint, kind="tensor", batch=batch, baxis=baxis, rank=rank, ctx=ctx, cut=cut)

    # ---- torch functions ---------------------------------------------------------
    def torch_call(self, name: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        fn = name.split(".")[-1]
        module = nn_modules.constructed(name, args, kwargs)
        if module is not None:
            return module
        if fn in ALLOC:
            if fn.endswith("_like"):
                like = args[0] if args else V()
                return V(kind="tensor", batch=like.batch, baxis=like.baxis, rank=like.rank)
            batch = self._size_batch(args[:1] if fn == "full" else args, node) or self._size_batch(
                [kwargs["size"]] if "size" in kwargs else [], node
            )
            rank = (
                len(args[0].items) if args and args[0].kind == "seq" and args[0].items is not None else None
            )
            return V(
                kind="tensor",
                batch=batch,
                rank=rank,
                baxis=_batch_axis_of_shape(args),
                extent=tiles.allocated(args[:1] if fn == "full" else args),
            )
        if fn == "arange":
            taint = first_taint(*args)
            t = extend(taint, self.step(node, "positions in the batch")) if taint else None
            return V(taint=t, kind="tensor", batch=taint, rank=1)
        if fn in RNG_DRAWS:
            return self.rng_draw(fn, args, kwargs, node, recv=None)
        if fn in SEEDING or name.endswith("Generator.manual_seed"):
            self.rng_seed(args[0] if args else kwargs.get("seed", V()), node)
            return V()
        if fn == "Generator":
            return V(kind="generator", ref={"seeded_loop": None})
        if fn in SCATTER_ACCUMULATE:
            self.scatter_accumulate(fn, node)
            return self.tensor_result(args, node, arith=False)
        if fn in SHAPE_TUNED or fn in CONVOLUTIONS:
            self.shape_tuned(fn, args[:1] if fn in CONVOLUTIONS else args, node)
        if fn == "einsum" and args and isinstance(args[0].const, str):
            out = self.einsum(args[0].const, args[1:], node)
            if out is not None:
                return out
        if fn in REDUCTIONS or fn in ROUTING_PER_ROW:
            recv = args[0] if args else V()
            return self.reduction(fn, recv, args[1:], kwargs, node)
        if fn in ("cat", "concat") and args and args[0].items:
            tile = tiles.concatenated(args[0].items, args[1] if len(args) > 1 else kwargs.get("dim"))
            if tile is not None:
                return tile
        if fn == "pad" and len(args) + len(kwargs) >= 2:
            tile = tiles.padded(args[0], args[1] if len(args) > 1 else kwargs.get("pad", V()))
            if tile is not None:
                return tile
        if fn in ("cat", "stack", "concat") and args and args[0].items:
            return self.tensor_result(args[0].items, node, arith=False)
        if fn in ("cat", "stack", "concat") and args and args[0].kind == "seq" and isinstance(args[0].ref, V):
            # ``torch.stack([p.sum(-1) for p in pieces])``: the elements' values, not their layout.
            elem = args[0].ref
            taint = elem.taint or args[0].taint
            if fn == "stack":  # a new axis: where the batch axis went is not followed
                return V(taint=taint, kind="tensor")
            return V(taint=taint, kind="tensor", batch=elem.batch, baxis=elem.baxis)
        if fn in PIECES and args:
            pieces = self.pieces(fn, args[0], args[1:], kwargs, node)
            if pieces is not None:
                return pieces
        given = args + list(kwargs.values())
        if given and not any(v.kind in ("tensor", "seq", "shape") for v in given):
            # ``np.log2(B * 8)``, ``np.clip(n, 128, 1024)``: a function of numbers, their dependence kept.
            taint = deep_taint(*given)
            if taint is not None:
                return V(taint=taint)
        return self.tensor_result(given, node, arith=fn in ARITH)

    def nn_module_call(self, module: V, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        """``self.fc(x)`` for a module built from ``torch.nn`` (``gate.static.nn_modules``)."""
        how, fn, extra = nn_modules.call_form(module)
        if how == "per_sample":
            return self.tensor_result(args[:1], node, arith=False)
        return self.torch_call(f"torch.nn.functional.{fn}", args, {**extra, **kwargs}, node)

    # ---- tensor methods ------------------------------------------------------------
    def tensor_method(self, recv: V, fn: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        if fn == "size":
            shape = shape_value(
                recv, node.func.value if isinstance(node.func, ast.Attribute) else node.func, self
            )
            if not args and "dim" not in kwargs:
                return shape
            return shape_item(shape, int_const(args[0] if args else kwargs.get("dim")), node, self)
        if fn in ("numel", "nelement"):
            if recv.batch is not None:
                return per_sample.numel_of(
                    recv, V(taint=(self.step(node, f"batch source: {self.src(node)}"),))
                )
            return V(taint=recv.taint)
        if fn in META:
            return V()
        if fn == "tolist" and recv.batch is not None and recv.rank != 0:
            # One Python value per sample, in batch order: the same as iterating or indexing the
            # tensor itself (an element of a loop over it is that sample's own value; len, max,
            # sum or a fixed index of it are batch statistics, as they are on the tensor).
            return recv
        if fn in ("item", "tolist"):
            if recv.batch is not None and recv.rank != 0:
                return V(taint=recv.taint or (self.step(node, f"batch statistic: {self.src(node)}"),))
            return V(taint=recv.taint)
        if fn in NEW_ALLOC:
            batch = self._size_batch(args[:1], node)
            sizes = args if fn != "new_full" else args[:1]
            return V(kind="tensor", batch=batch, extent=tiles.allocated(sizes))
        if fn in RNG_DRAWS:
            return self.rng_draw(fn, args, kwargs, node, recv=recv)
        if fn in SCATTER_ACCUMULATE:
            if fn != "index_put_" or ("accumulate" in kwargs and kwargs["accumulate"].const is not False):
                self.scatter_accumulate(fn, node)
            return recv
        if fn in REDUCTIONS or fn in ROUTING_PER_ROW:
            return self.reduction(fn, recv, args, kwargs, node)
        if fn in SHAPE_TUNED:
            self.shape_tuned(fn, [recv, *args], node)
        if fn in PIECES:
            pieces = self.pieces(fn, recv, args, kwargs, node)
            if pieces is not None:
                return pieces
        if fn in ("to", "type") and recv.kind == "tensor" and recv.taint is None:
            # ``x.to(torch.float64 if B < 8 else torch.float32)``: computed at a precision the batch chose.
            given = [a for a in [*args, kwargs.get("dtype")] if a is not None and a.kind == "value"]
            dtype = first_taint(*given)
            if dtype is not None:
                taint = dtype_step(dtype, self.step(node, f"converted to {DTYPE_FROM_BATCH}"))
                return V(taint=taint, kind="tensor", batch=recv.batch, baxis=recv.baxis, rank=recv.rank)
        if fn in ("view", "reshape") and recv.kind == "tensor":
            shaped = self.reshaped(recv, args, node)
            if shaped is not None:
                return shaped
        if fn in (
            "view",
            "reshape",
            "expand",
            "flatten",
            "contiguous",
            "float",
            "half",
            "bfloat16",
            "to",
            "clone",
            "detach",
            "unsqueeze",
            "squeeze",
            "view_as",
            "reshape_as",
            "type",
            "cuda",
            "cpu",
            *METHOD_DTYPES,
        ):
            to_dtype = converted_to(fn, args, kwargs)
            same = fn in _SAME_SHAPE or fn in METHOD_DTYPES
            return V(
                taint=recv.taint,
                kind="tensor",
                batch=recv.batch,
                baxis=recv.baxis,
                rank=recv.rank if same else None,
                ctx=recv.ctx if same else (),
                cut=recv.cut if same else None,
                integral=is_integral(to_dtype) if to_dtype is not None else recv.integral,
                dtype=to_dtype or recv.dtype,
                extent=recv.extent if same and recv.extent == per_sample.ARGUMENT else None,
            )
        return self.tensor_result([recv, *args, *kwargs.values()], node, arith=fn in ARITH)

    def pieces(self, fn: str, recv: V, rest: list[V], kwargs: dict[str, V], node: ast.Call) -> V | None:
        """``x.chunk(n, dim)``, ``x.split(size, dim)``, ``x.tensor_split(n, dim)`` with a count or size
        that depends on the batch, along a per-sample axis: each piece's extent along it depends on
        the batch (a reduction over the pieces then adds partial sums the batch decided). ``None``:
        nothing batch-dependent about the cut (the generic result)."""
        if recv.kind != "tensor":
            return None
        size = rest[0] if rest else next((kwargs[k] for k in _PIECE_ARGS if k in kwargs), None)
        if fn == "split" and size is not None and size.taint is None:
            # ``x.split(C)`` along the batch axis: tiles of C samples, the last one what is left.
            dim_v = rest[1] if len(rest) > 1 else kwargs.get("dim", V(const=0))
            tile = tiles.window(recv, size, node) if int_const(dim_v) == 0 else None
            return V(kind="seq", ref=tile) if tile is not None else None
        if size is None or size.taint is None:
            return None
        dim_v = rest[1] if len(rest) > 1 else kwargs.get("dim", V(const=0))
        dim = int_const(dim_v)
        if dim is None or (dim < 0 and recv.rank is None):
            return None
        axis = dim + recv.rank if dim < 0 and recv.rank is not None else dim
        if recv.batch is not None and axis == recv.baxis:
            return None  # pieces of the batch: each sample's row stays whole
        piece = V(
            taint=recv.taint,
            kind="tensor",
            batch=recv.batch,
            baxis=recv.baxis,
            rank=recv.rank,
            ctx=tuple(sorted({*recv.ctx, axis})),
            cut=extend(size.taint, self.step(node, f"{fn} into pieces whose extent depends on the batch")),
            integral=recv.integral,
        )
        return V(kind="seq", ref=piece)

    def einsum(self, equation: str, operands: list[V], node: ast.Call) -> V | None:
        """``einsum("hgd,lhd->hgl", q, k_piece)``: where the operands' batch-dependent extents go (an
        output axis keeps one; a summed-out letter makes a partial result). ``None``: nothing to follow."""
        if not any(v.kind == "tensor" and v.ctx for v in operands):
            return None
        spec = equation.replace(" ", "")
        if "->" not in spec or "." in spec:
            return None
        inputs, output = spec.split("->")
        specs = inputs.split(",")
        if len(specs) != len(operands):
            return None
        ctx: set[int] = set()
        summed = False
        for letters, v in zip(specs, operands, strict=True):
            for axis in v.ctx if v.kind == "tensor" else ():
                if axis >= len(letters):
                    continue
                if letters[axis] in output:
                    ctx.add(output.index(letters[axis]))
                else:
                    summed = True
        base = self.tensor_result(operands, node, arith=False)
        taint = base.taint
        if summed and taint is None:
            taint = (
                self.step(
                    node, f"einsum sums over an axis whose extent depends on the batch: {PARTIAL_RESULT}"
                ),
            )
        return V(
            taint=taint,
            kind="tensor",
            batch=base.batch,
            baxis=base.baxis,
            rank=len(output),
            ctx=tuple(sorted(ctx)),
        )

    def reshaped(self, recv: V, args: list[V], node: ast.Call) -> V | None:
        """``x.view(B, g, H // g)`` with ``g`` from the batch: the new axes' extents depend on it (a
        reduction over them adds partial sums the batch decided). ``None``: nothing to record."""
        one = len(args) == 1 and args[0].kind in ("seq", "shape") and args[0].items
        sizes = args[0].items if one and args[0].items else args
        if not sizes or any(s.kind not in ("value", "shape") for s in sizes):
            return None
        ctx = {i for i, s in enumerate(sizes) if s.taint is not None and i != 0}
        if not ctx:
            return None
        axes, rank = tuple(sorted(ctx)), len(sizes)
        why = extend(first_taint(*sizes), self.step(node, "groups whose extent depends on the batch"))
        return V(
            taint=recv.taint, kind="tensor", batch=recv.batch, baxis=recv.baxis, rank=rank, ctx=axes, cut=why
        )

    def reduction(self, fn: str, recv: V, rest: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        """A reduction over the batch axis makes a batch statistic; over other axes, per-sample data."""
        dim_v = kwargs.get("dim", kwargs.get("axis"))
        if dim_v is None and rest and fn not in ("topk", "kthvalue", "quantile", "bincount", "histc"):
            dim_v = rest[0]
        if fn in ("topk", "kthvalue") and dim_v is None and len(rest) > 1:
            dim_v = rest[1]
        dim = int_const(dim_v)
        per_row_default = fn in ("softmax", "log_softmax", "topk", "sort", "argsort", "cumsum", "cumprod")
        over_batch = False
        if recv.batch is not None:
            if dim is None and dim_v is None:
                over_batch = not per_row_default or recv.rank == 1
            elif dim is not None:
                over_batch = dim == recv.baxis or (recv.rank is not None and dim == recv.baxis - recv.rank)
        taint = recv.taint
        if over_batch and taint is None:
            taint = (self.step(node, f"batch statistic: {fn} over the batch axis"),)
        if taint is None and recv.ctx and not over_batch and fn not in ("softmax", "log_softmax"):
            dims = [int_const(d) for d in dim_v.items] if dim_v is not None and dim_v.items else [dim]
            axes = {d + recv.rank if d is not None and d < 0 and recv.rank is not None else d for d in dims}
            regrouped = len(recv.ctx) > 1 and axes >= set(recv.ctx)  # every group of a view: one sum
            if not regrouped and ((dim_v is None and not per_row_default) or axes & set(recv.ctx)):
                if exact_reduction(fn, recv, kwargs):
                    self.exact_piece(fn, recv, node)
                else:
                    why = f"{fn} over an axis whose extent depends on the batch: {PARTIAL_RESULT}"
                    taint = (self.step(node, why),)
        if fn in ("sort", "argsort") and recv.batch is not None and not over_batch:
            self.sample_order(fn, recv, node)
        if fn in self.an.contract.routing_calls:
            self.routing(fn, recv, rest, kwargs, node, over_batch)
        keeps_batch = recv.batch is not None and not over_batch
        keepdim = kwargs.get("keepdim")
        same_rank = per_row_default or fn == "topk" or (keepdim is not None and keepdim.const is True)
        rank = recv.rank if same_rank else (recv.rank - 1 if recv.rank and dim is not None else None)
        out = V(
            taint=taint, kind="tensor", batch=recv.batch if keeps_batch else None, baxis=recv.baxis, rank=rank
        )
        if fn in ("topk", "sort", "aminmax", "kthvalue", "mode", "median") and (
            dim_v is not None or fn != "median"
        ):
            return V(kind="seq", items=[out, out], taint=None)
        return out
