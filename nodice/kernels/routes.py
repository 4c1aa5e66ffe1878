"""How a torch op reaches a nodice kernel: what it covers, how its arguments are adapted, how it falls back.

Each route wraps one task's gated kernel behind one ``aten`` operator. A call
the kernel covers (the devices and dtypes the gate validated, the shapes and
arguments the task's signature has) is adapted to the task's signature and
run; every other call goes to torch's own implementation, unchanged:

* ``mm``, ``addmm``, ``bmm`` fall back to their ``.out`` overloads, which run
  the same structured ATen kernel as the functional op and are not overridden,
  so the fallback cannot recurse into the route;
* ``rms_norm`` and ``scaled_dot_product_attention`` are
  CompositeImplicitAutograd ops: they fall back to that composite kernel
  (``OpOverload.decompose``), which then dispatches torch's fused kernels
  (``_fused_rms_norm``, the SDPA backends) exactly as without the mode.

Why a routed call stays batch-invariant: every bundled kernel has passed the
gate, and its configuration (tiles, warps, stages, split counts) is keyed on
non-batch dimensions only (K and N of a GEMM, the hidden size of a norm, the
head dim and dtype of attention). The adapters add only work that is the same
for every row: making operands contiguous, flattening leading dims into rows,
adding a bias elementwise after the GEMM.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

# Larger than any problem the gate checks, and past int32 offsets inside the kernels.
MAX_ELEMENTS = 2**31 - 1
# Head dims the attention kernel's tl.arange and tl.dot tiles take (powers of two, 16 to 128).
ATTENTION_HEAD_DIMS = (16, 32, 64, 128)


@dataclass
class RouteStats:
    """Calls a route has seen since the mode was enabled; the last fallback's reason, for diagnosis."""

    routed: int = 0
    fallbacks: int = 0
    last_fallback: str = ""


@dataclass(frozen=True)
class Target:
    """Where routed tensors must live and in which dtypes: what the gate validated."""

    device: torch.device
    device_name: str
    dtypes: frozenset[torch.dtype]

    def refuse(self, *tensors: Any) -> str | None:
        """Why these tensors are outside the validated device and dtypes, or ``None``."""
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            return "an argument is not a tensor"
        first = tensors[0]
        for t in tensors:
            if t.layout != torch.strided or t.is_nested:
                return f"{t.layout} or nested tensor"
            if t.dtype != first.dtype:
                return f"mixed dtypes ({first.dtype}, {t.dtype})"
            if t.device.type != self.device.type:
                return f"a {t.device.type} tensor (the mode targets {self.device.type})"
            if t.device.type == "cuda" and _gpu_name(t.device.index) != self.device_name:
                return f"{t.device} is a {_gpu_name(t.device.index)}, the gate judged {self.device_name}"
            if t.numel() > MAX_ELEMENTS:
                return "more than 2^31 elements"
        if first.dtype not in self.dtypes:
            names = ", ".join(sorted(_name(d) for d in self.dtypes))
            return f"{_name(first.dtype)} (validated by the gate here: {names})"
        return None


@functools.cache
def _gpu_name(index: int | None) -> str:
    return torch.cuda.get_device_name(index)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tf32_allowed() -> bool:
    """Whether torch itself would run an fp32 CUDA matmul in TF32 (the new API first; mixing them raises)."""
    backends: Any = torch.backends
    try:
        precision = backends.cuda.matmul.fp32_precision
        if precision == "none":
            precision = backends.fp32_precision
        return bool(precision == "tf32")
    except AttributeError:
        return bool(backends.cuda.matmul.allow_tf32)


def _needs_grad(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


@contextlib.contextmanager
def _launch_on(t: torch.Tensor) -> Iterator[None]:
    """Triton launches on the current CUDA device: make it the tensor's."""
    if t.device.type == "cuda" and t.device.index not in (None, torch.cuda.current_device()):
        with torch.cuda.device(t.device):
            yield
    else:
        yield


@dataclass(eq=False)
class Route:
    """One aten op routed to one task's kernel.

    ``composite`` routes (CompositeImplicitAutograd ops) are registered at the
    backend key and at its Autograd key: at the Autograd key the route sees
    calls before torch decomposes them, and a call that needs a gradient falls
    back to the composite kernel there, so autograd records torch's graph.
    ``tf32_dot`` routes multiply with ``tl.dot``, which computes fp32 in TF32 on
    CUDA: they take fp32 only where torch would use TF32 too.
    """

    op: ClassVar[str]
    task: ClassVar[str]
    composite: ClassVar[bool] = False
    tf32_dot: ClassVar[bool] = True

    kernel: Callable[..., Any]
    target: Target
    stats: RouteStats = field(default_factory=RouteStats)

    def dispatch_keys(self) -> tuple[str, ...]:
        backend = "CUDA" if self.target.device.type == "cuda" else "CPU"
        return (backend, f"Autograd{backend}") if self.composite else (backend,)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        reason = self.uncovered(*args, **kwargs)
        if reason is None:
            self.stats.routed += 1
            with _launch_on(args[0]):
                return self.run(*args, **kwargs)
        self.stats.fallbacks += 1
        self.stats.last_fallback = reason
        return self.fallback(*args, **kwargs)

    def refuse(self, *tensors: Any) -> str | None:
        reason = self.target.refuse(*tensors)
        if reason is not None:
            return reason
        fp32_cuda = tensors[0].dtype == torch.float32 and tensors[0].device.type == "cuda"
        if self.tf32_dot and fp32_cuda and not _tf32_allowed():
            return "float32 without TF32 allowed (the kernel's tl.dot computes fp32 in TF32)"
        return None

    def uncovered(self, *args: Any, **kwargs: Any) -> str | None:
        raise NotImplementedError

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def fallback(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _gemm_uncovered(route: Route, a: Any, b: Any) -> str | None:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != 2 or b.dim() != 2:
        return "not a pair of 2-D tensors"
    reason = route.refuse(a, b)
    if reason is not None:
        return reason
    if a.shape[1] != b.shape[0]:
        return f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply"
    if a.numel() == 0 or b.numel() == 0:
        return "an empty operand"
    if a.shape[0] * b.shape[1] > MAX_ELEMENTS:
        return "more than 2^31 output elements"
    return None


class MmRoute(Route):
    """``mm(a, b)``: the gemm kernel on contiguous operands (the layout the gate fed it)."""

    op = "mm"
    task = "gemm"

    def uncovered(self, a: Any, b: Any) -> str | None:
        return _gemm_uncovered(self, a, b)

    def run(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.kernel(a.contiguous(), b.contiguous())

    def fallback(self, a: Any, b: Any) -> Any:
        return torch.ops.aten.mm.out(a, b, out=a.new_empty(0))


class AddmmRoute(Route):
    """``addmm(bias, a, b, beta, alpha) = beta·bias + alpha·(a @ b)``: the GEMM, then the scalars and bias.

    The product is rounded to the output dtype before the bias is added
    (torch's fused epilogue adds it in fp32): a rounding difference within the
    task's tolerance, the same for every row.
    """

    op = "addmm"
    task = "gemm"

    def uncovered(self, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> str | None:
        if not all(isinstance(s, int | float) for s in (beta, alpha)):
            return "complex or tensor beta/alpha"
        reason = _gemm_uncovered(self, a, b) or self.refuse(a, bias)
        if reason is not None:
            return reason
        out_shape = (a.shape[0], b.shape[1])
        try:
            if torch.broadcast_shapes(bias.shape, out_shape) != out_shape:
                return f"bias {tuple(bias.shape)} does not broadcast to {out_shape}"
        except RuntimeError:
            return f"bias {tuple(bias.shape)} does not broadcast to {out_shape}"
        return None

    def run(
        self, bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: float = 1, alpha: float = 1
    ) -> torch.Tensor:
        c: torch.Tensor = self.kernel(a.contiguous(), b.contiguous())
        if alpha != 1:
            c.mul_(alpha)
        if beta != 0:
            c.add_(bias, alpha=beta)
        return c

    def fallback(self, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
        return torch.ops.aten.addmm.out(bias, a, b, beta=beta, alpha=alpha, out=a.new_empty(0))


class BmmRoute(Route):
    """``bmm(a, b)``: the gemm kernel once per matrix of the batch.

    A matrix's product cannot depend on how many others share the call, since
    each is its own launch with the same configuration; the price is one launch
    per matrix (the gemm task has no batched signature the gate could check).
    """

    op = "bmm"
    task = "gemm"

    def uncovered(self, a: Any, b: Any) -> str | None:
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != 3 or b.dim() != 3:
            return "not a pair of 3-D tensors"
        if a.shape[0] != b.shape[0]:
            return "batch sizes differ"
        if a.shape[0] == 0:
            return "an empty batch"
        reason = _gemm_uncovered(self, a[0], b[0])
        if reason is None and a.numel() > MAX_ELEMENTS:
            return "more than 2^31 elements"
        return reason

    def run(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = a.new_empty((a.shape[0], a.shape[1], b.shape[2]))
        for i in range(a.shape[0]):
            out[i] = self.kernel(a[i], b[i])
        return out

    def fallback(self, a: Any, b: Any) -> Any:
        return torch.ops.aten.bmm.out(a, b, out=a.new_empty(0))


class RmsNormRoute(Route):
    """``rms_norm(x, normalized_shape, weight, eps)``: the normalised dims flattened into one hidden axis.

    Leading dims become rows of ``[rows, hidden]``; a missing weight is a
    vector of ones (an exact product), a missing eps is fp32's machine epsilon,
    as in torch's kernels.
    """

    op = "rms_norm"
    task = "rmsnorm"
    composite = True
    tf32_dot = False

    def uncovered(self, x: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> str | None:
        reason = self.refuse(x, *([] if weight is None else [weight]))
        if reason is not None:
            return reason
        dims = tuple(int(d) for d in normalized_shape)
        if not dims or x.dim() < len(dims) or tuple(x.shape[-len(dims) :]) != dims:
            return f"normalized_shape {list(dims)} is not the trailing shape of {tuple(x.shape)}"
        if weight is not None and tuple(weight.shape) != dims:
            return f"weight {tuple(weight.shape)} is not {dims}"
        if x.numel() == 0:
            return "an empty input"
        if _needs_grad(x, weight):
            return "an input requires grad (the kernel has no backward)"
        return None

    def run(
        self, x: torch.Tensor, normalized_shape: Any, weight: torch.Tensor | None = None, eps: Any = None
    ) -> torch.Tensor:
        hidden = math.prod(int(d) for d in normalized_shape)
        rows = x.reshape(-1, hidden).contiguous()
        if weight is None:
            w = torch.ones(hidden, dtype=x.dtype, device=x.device)
        else:
            w = weight.reshape(hidden).contiguous()
        e = torch.finfo(torch.float32).eps if eps is None else float(eps)
        y: torch.Tensor = self.kernel(rows, w, e)
        return y.view(x.shape)

    def fallback(self, x: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> Any:
        return torch.ops.aten.rms_norm.default.decompose(x, normalized_shape, weight, eps)


class SdpaRoute(Route):
    """``scaled_dot_product_attention`` on 4-D ``[B, H, S, D]`` self-attention, causal or not, MHA or GQA.

    Covered: no ``attn_mask``, no dropout, as many keys as queries, one head
    dim for q, k and v in 16–128 (a power of two), equal head counts or
    ``enable_gqa`` with query heads a multiple of kv heads. ``is_causal`` is
    torch's top-left mask, which is the kernel's when S_q == S_k.
    """

    op = "scaled_dot_product_attention"
    task = "attention_prefill"
    composite = True

    def uncovered(
        self,
        q: Any,
        k: Any,
        v: Any,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> str | None:
        if attn_mask is not None:
            return "an attn_mask"
        if dropout_p != 0.0:
            return "dropout"
        reason = self.refuse(q, k, v)
        if reason is not None:
            return reason
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            return "not 4-D [B, H, S, D]"
        batch, q_heads, seq, head_dim = q.shape
        if k.shape != v.shape or k.shape[0] != batch or k.shape[3] != head_dim:
            return f"k {tuple(k.shape)} and v {tuple(v.shape)} do not match q {tuple(q.shape)}"
        if k.shape[2] != seq:
            return "fewer or more keys than queries"
        kv_heads = k.shape[1]
        if kv_heads == 0 or (q_heads != kv_heads and not (enable_gqa and q_heads % kv_heads == 0)):
            return f"{q_heads} query heads over {kv_heads} kv heads"
        if head_dim not in ATTENTION_HEAD_DIMS:
            return f"head dim {head_dim} (covered: {', '.join(map(str, ATTENTION_HEAD_DIMS))})"
        if q.numel() == 0:
            return "an empty input"
        if _needs_grad(q, k, v):
            return "an input requires grad (the kernel has no backward)"
        return None

    def run(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        return self.kernel(q.contiguous(), k.contiguous(), v.contiguous(), bool(is_causal), sm_scale)

    def fallback(self, q: Any, k: Any, v: Any, *args: Any, **kwargs: Any) -> Any:
        return torch.ops.aten.scaled_dot_product_attention.default.decompose(q, k, v, *args, **kwargs)


ROUTES: tuple[type[Route], ...] = (MmRoute, AddmmRoute, BmmRoute, RmsNormRoute, SdpaRoute)
