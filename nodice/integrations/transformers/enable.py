"""``enable(model)``: one call that makes a transformers model's generation batch-invariant.

It gates and loads the attention and sampling kernels, turns on the batch-invariant mode for
the model's device (projections, MLP and ``lm_head`` through ``aten::mm``/``addmm``), sends
the model's RMSNorm modules through ``aten::rms_norm`` (their hand-written mean of squares is
a torch reduction whose order may change with the number of rows), sets
``attn_implementation="nodice"`` (``"paged|nodice"`` once continuous batching switches to
its paged form), gives continuous batching nodice's recording scheduler without CUDA graphs,
and puts nodice's seeded sampler first among the logits processors. What it cannot cover stays
the model's own, and the report says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import ContinuousBatchingConfig

from nodice.errors import NodiceError
from nodice.integrations.transformers.kernels import TASKS, CallStats, KernelSet, install, load_kernels
from nodice.integrations.transformers.moe import TASK as MOE_TASK
from nodice.integrations.transformers.moe import moe_blocks, route_moe
from nodice.integrations.transformers.registry import register
from nodice.integrations.transformers.sampler import LogitsRecord, NodiceSampler, SamplingParams
from nodice.kernels.mode import BatchInvariantMode, ModeReport, enable_batch_invariant_mode, gated_kernel
from nodice.kernels.routes import ATTENTION_HEAD_DIMS


class IntegrationError(NodiceError):
    """The integration cannot be enabled on this model or in this process."""

    kind = "transformers integration"


def _check_interpreter(device: torch.device) -> None:
    """On CPU the kernels run under Triton's interpreter, which must be on before triton.language loads."""
    if device.type != "cpu":
        return
    import triton.language as tl

    if type(tl.cdiv).__name__ != "InterpretedFunction":
        raise IntegrationError(
            "Triton was imported before TRITON_INTERPRET=1 was set: on CPU, import "
            "nodice.integrations.transformers (or set TRITON_INTERPRET=1) before transformers"
        )


class RoutedRMSNorm(torch.nn.Module):
    """A model's RMSNorm as ``F.rms_norm`` (``aten::rms_norm``, which the mode routes); same weight."""

    def __init__(self, weight: torch.nn.Parameter, eps: float, kind: str) -> None:
        super().__init__()
        self.weight = weight
        self.eps = eps
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight.to(x.dtype), self.eps)

    def extra_repr(self) -> str:
        return f"{self.kind}, eps={self.eps}"


@dataclass(frozen=True)
class IntegrationReport:
    """What ``enable`` changed on the model, and what stays the model's own, with reasons."""

    model: str
    device: str
    attn_implementation: str
    attention: str
    kernels: dict[str, str]
    norms: int
    mode: ModeReport
    scheduler: str
    sampler: str
    # Linear weights stored transposed, so that the (K, N) operand F.linear hands the GEMM is contiguous.
    linear_weights: int = 0
    # Sparse MoE blocks run as the moe kernel, and those left to the model ("<module>: <why>").
    moe_blocks: int = 0
    moe_kept: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"nodice on {self.model} ({self.device})",
            f"  attention: {self.attn_implementation} ({self.attention})",
            *(f"  {task}: {why}" for task, why in self.kernels.items()),
            f"  RMSNorm modules through aten::rms_norm: {self.norms}",
            f"  Linear weights stored as (in, out) for the gemm kernel: {self.linear_weights}",
            *(
                [f"  sparse MoE blocks through the moe kernel: {self.moe_blocks}"]
                if self.moe_blocks or self.moe_kept
                else []
            ),
            *(f"    kept: {why}" for why in self.moe_kept[:3]),
            f"  continuous batching: {self.scheduler}",
            f"  sampling: {self.sampler}",
            *("  " + line for line in self.mode.summary().splitlines()),
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(eq=False)
class Integration:
    """The handle ``enable`` returns: the report, per-path call counts, and the logits record."""

    report: IntegrationReport
    kernels: KernelSet
    mode: BatchInvariantMode
    record: LogitsRecord = field(default_factory=LogitsRecord)
    verify: bool = True
    cache: bool | str = True

    def suspend(self) -> None:
        """Turn the batch-invariant mode off (process-wide): torch's own GEMMs and norms again."""
        self.mode.disable()

    def resume(self) -> None:
        """Turn the mode back on with the same settings (verdicts already in the process), and make
        this integration's kernels the ones attention and sampling use on its device again (a later
        ``enable`` in the process installs its own)."""
        install(self.kernels)
        if not self.mode.enabled:
            self.mode = enable_batch_invariant_mode(self.kernels.device, verify=self.verify, cache=self.cache)

    def stats(self) -> dict[str, CallStats]:
        """Per path (attention, paged, prefill, decode, sampling): calls routed and fallbacks."""
        return {path: CallStats(**asdict(s)) for path, s in self.kernels.stats.items()}


def _attention_gap(config: Any, kernels: KernelSet) -> str | None:
    """Why the model's attention cannot be nodice's at all, or ``None``."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        layer_types = getattr(text, "layer_types", None) or ()
        if not layer_types or "sliding_attention" in layer_types:
            return "sliding-window attention (not covered)"
    heads = getattr(text, "num_attention_heads", 0)
    head_dim = getattr(text, "head_dim", None) or (text.hidden_size // heads if heads else 0)
    if head_dim not in ATTENTION_HEAD_DIMS:
        return f"head dim {head_dim} (covered: {', '.join(map(str, ATTENTION_HEAD_DIMS))})"
    for task in ("attention_prefill", "attention_varlen"):
        k = kernels.kernels[task]
        if not k.usable:
            return f"{task}: {k.reason}"
    return None


def _route_norms(model: torch.nn.Module) -> int:
    """Replace every ``*RMSNorm`` module that holds a weight and an epsilon by :class:`RoutedRMSNorm`."""
    swaps = []
    for name, mod in model.named_modules():
        kind = type(mod).__name__
        eps = getattr(mod, "variance_epsilon", getattr(mod, "eps", None))
        weight = getattr(mod, "weight", None)
        if kind.endswith("RMSNorm") and isinstance(weight, torch.nn.Parameter) and eps is not None:
            swaps.append((name, RoutedRMSNorm(weight, float(eps), kind)))
    for name, new in swaps:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, new)
    return len(swaps)


def _lay_out_linear_weights(model: torch.nn.Module) -> int:
    """Store each ``nn.Linear`` weight as its transpose's contiguous copy, seen through ``.t()``.

    ``F.linear(x, W)`` reaches the mode as ``addmm``/``mm`` with ``W.t()``, and the gemm kernel runs on
    a contiguous (K, N) operand: with W stored (N, K) the route copies the whole weight on every call
    (most of a decode step's time). The same values in the other layout: the shape, the Parameter
    (shared ties included) and every output bit are unchanged; the copy happens once, here."""
    changed = 0
    seen: set[int] = set()
    for mod in model.modules():
        weight = getattr(mod, "weight", None)
        if not isinstance(mod, torch.nn.Linear) or not isinstance(weight, torch.nn.Parameter):
            continue
        if id(weight) in seen or weight.dim() != 2 or not weight.is_contiguous() or weight.shape[1] == 1:
            continue
        seen.add(id(weight))
        with torch.no_grad():
            weight.data = weight.data.t().contiguous().t()
        changed += 1
    return changed


def _install_sampler(model: Any, kernels: KernelSet | None, seed: int, record: LogitsRecord) -> None:
    """Put :class:`NodiceSampler` first in the processors continuous batching builds for this model."""
    original = getattr(model, "_nodice_original_logits_processor", None) or model._get_logits_processor

    def with_sampler(generation_config: Any, *args: Any, **kwargs: Any) -> LogitsProcessorList:
        rest = original(generation_config, *args, **kwargs)
        sampler = NodiceSampler(
            SamplingParams.from_config(generation_config), kernels, seed=seed, record=record
        )
        return LogitsProcessorList([sampler, *rest])

    model._nodice_original_logits_processor = original
    model._get_logits_processor = with_sampler


def uninstall_sampler(model: Any) -> None:
    """Give ``model`` back the logits processors transformers builds (undoes :func:`_install_sampler`)."""
    original = getattr(model, "_nodice_original_logits_processor", None)
    if original is not None:
        model._get_logits_processor = original
        del model._nodice_original_logits_processor


def continuous_batching_config(
    *, cuda_graphs: bool | None = None, **overrides: Any
) -> ContinuousBatchingConfig:
    """A ``ContinuousBatchingConfig`` for nodice: its recording scheduler, synchronous, and on CUDA
    (``cuda_graphs`` None: where CUDA is available) each decode step as a CUDA graph.

    Graphs cover the decode path only (transformers' decode fast path, a block table per request):
    the varlen path reads the step's lengths on the host and runs eagerly. transformers pads every
    step's inputs once any path is graphed; the padding intervals are 1 so that an eager varlen
    step computes no padding rows (a decode step is still padded to a power of two, the batch
    sizes it captures)."""
    graphs = torch.cuda.is_available() if cuda_graphs is None else cuda_graphs
    settings: dict[str, Any] = {
        "scheduler_type": "nodice",
        "use_cuda_graph": (False, True) if graphs else False,
        "use_async_batching": False,
    }
    if graphs:
        settings.update(q_padding_interval_size=1, kv_padding_interval_size=1)
    settings.update(overrides)
    return ContinuousBatchingConfig(**settings)


def enable(
    model: Any,
    *,
    verify: bool = True,
    cache: bool | str = True,
    seed: int = 0,
    sampler: bool = True,
) -> Integration:
    """Make ``model``'s forward, ``generate`` and ``generate_batch`` batch-invariant with nodice's kernels.

    ``verify=False`` skips the BI gate (tests only, as for the mode); ``cache`` is the mode's
    verdict cache; ``seed`` is the run's sampling seed (each request draws from its id and this
    seed); ``sampler=False`` leaves sampling to transformers (batch-dependent with ``do_sample``).
    """
    register()
    device = next(model.parameters()).device
    _check_interpreter(device)
    kernels = load_kernels(device, verify=verify, cache=cache)
    install(kernels)
    mode = enable_batch_invariant_mode(device, verify=verify, cache=cache)
    gap = _attention_gap(model.config, kernels)
    if gap is None:
        model.set_attn_implementation("nodice")
        attention = "attention_prefill / attention_varlen; paged: attention_varlen + attention_decode"
    else:
        attention = f"the model's own: {gap}"
    norms = _route_norms(model)
    linear_weights = _lay_out_linear_weights(model) if mode.report.status("linear").routed else 0
    moe_routed, moe_kept = 0, list[str]()
    if moe_blocks(model):
        kernels.kernels[MOE_TASK] = gated_kernel(MOE_TASK, device, verify=verify, cache=cache)
        if kernels.kernels[MOE_TASK].usable:
            moe_routed, moe_kept = route_moe(model, kernels)
        else:
            moe_kept = [f"every block: moe: {kernels.kernels[MOE_TASK].reason}"]
    record = LogitsRecord()
    if gap is None and getattr(model.generation_config, "continuous_batching_config", None) is None:
        model.generation_config.continuous_batching_config = continuous_batching_config()
    if sampler:
        _install_sampler(model, kernels, seed, record)
    samp = kernels.kernels["sampling"]
    report = IntegrationReport(
        model=type(model).__name__,
        device=str(device),
        attn_implementation=model.config._attn_implementation,
        attention=attention,
        kernels={
            t: (
                f"gated ({', '.join(kernels.kernels[t].dtypes)}; {kernels.kernels[t].reason})"
                if kernels.kernels[t].usable
                else f"not used: {kernels.kernels[t].reason}"
            )
            for t in (*TASKS, *([MOE_TASK] if MOE_TASK in kernels.kernels else []))
        },
        norms=norms,
        linear_weights=linear_weights,
        moe_blocks=moe_routed,
        moe_kept=moe_kept,
        mode=mode.report,
        scheduler=(
            "nodice scheduler (FIFO order, batches recorded), synchronous, "
            + ("decode steps as CUDA graphs" if torch.cuda.is_available() else "no CUDA graphs")
        )
        if gap is None
        else "transformers' own",
        sampler=(
            "nodice sampling kernel, a seed per request and draw"
            if samp.usable
            else f"per-row torch draws, a seed per request and draw ({samp.reason})"
        )
        if sampler
        else "transformers' own (torch.multinomial over the batch)",
    )
    return Integration(report, kernels, mode, record, verify, cache)
