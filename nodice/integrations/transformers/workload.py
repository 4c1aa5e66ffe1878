"""What ``nodice bench e2e`` generates: a model from a config with random weights, requests, schedules.

No hub download: the model is built from a config (Llama-3 or Qwen3 dense) with seeded random
weights. The requests mix prompt and output lengths, and two of them share a prompt (as GRPO's
completions of one prompt do), so that prefix sharing cuts one of them to a one-token prefill.
A schedule is an arrival order with the continuous-batching limits (token budget per step,
requests per step, FIFO or prefill-first), so that a request's tokens are computed in different
chunks, beside different batchmates, at different positions of the pack.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from nodice.errors import UsageError


@dataclass(frozen=True)
class ModelShape:
    """A decoder's dimensions (Llama-3 / Qwen3 names); a ``qwen3_moe`` one's MLPs are sparse MoE blocks."""

    family: str  # "llama3", "qwen3" or "qwen3_moe"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0


@dataclass(frozen=True)
class Mix:
    """Prompt and output lengths, each drawn uniformly from its range."""

    name: str
    prompt: tuple[int, int]
    output: tuple[int, int]


@dataclass(frozen=True)
class Schedule:
    """An arrival order and the continuous-batching limits a run uses."""

    name: str
    order: str  # "given", "reversed" or "shuffled"
    max_batch_tokens: int
    max_requests_per_batch: int
    scheduler: str = "nodice"  # or "nodice-prefill-first"


@dataclass(frozen=True)
class Preset:
    """One bench configuration: model, dtype, requests and schedules for invariance, mixes for the tax."""

    shape: ModelShape
    dtype: str
    requests: int
    mix: Mix
    schedules: tuple[Schedule, ...]
    tax_mixes: tuple[Mix, ...]
    concurrency: tuple[int, ...]
    forward_batch: int
    forward_seq: int
    block_size: int
    num_blocks: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


LLAMA3_8B = ModelShape("llama3", 32, 4096, 32, 8, 128, 14336, 128256)
QWEN3_8B = ModelShape("qwen3", 36, 4096, 32, 8, 128, 12288, 151936)
# Qwen3-30B-A3B: 48 layers, 128 experts of which 8 per token, expert width 768.
QWEN3_30B_A3B = ModelShape("qwen3_moe", 48, 2048, 32, 4, 128, 6144, 151936, 128, 8, 768)
TINY = ModelShape("llama3", 2, 64, 4, 2, 16, 128, 128)
# The tiny preset's MoE form: 8 experts, 2 per token, expert width 32.
TINY_MOE_EXPERTS = {"experts": 8, "top_k": 2, "moe_intermediate": 32}
FAMILIES = ("llama3", "qwen3", "qwen3_moe")

PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        TINY,
        "float32",
        requests=4,
        mix=Mix("mixed", (3, 40), (2, 5)),
        schedules=(
            Schedule("given-wide", "given", 256, 8),
            Schedule("reversed-chunked", "reversed", 12, 8),
            Schedule("shuffled-pairs", "shuffled", 32, 2, "nodice-prefill-first"),
        ),
        tax_mixes=(Mix("prefill-heavy", (24, 40), (2, 3)), Mix("decode-heavy", (3, 8), (8, 12))),
        concurrency=(2, 4),
        forward_batch=2,
        forward_seq=16,
        block_size=16,
        num_blocks=64,
    ),
    "8b": Preset(
        LLAMA3_8B,
        "bfloat16",
        requests=112,
        mix=Mix("mixed", (16, 1024), (32, 160)),
        schedules=(
            Schedule("given-wide", "given", 8192, 96),
            Schedule("reversed-chunked", "reversed", 512, 96),
            Schedule("shuffled-32", "shuffled", 2048, 32, "nodice-prefill-first"),
        ),
        tax_mixes=(Mix("prefill-heavy", (1024, 2048), (16, 32)), Mix("decode-heavy", (64, 256), (256, 384))),
        concurrency=(32, 64),
        forward_batch=32,
        forward_seq=512,
        block_size=256,
        num_blocks=1024,
    ),
}


def preset(name: str, *, layers: int | None = None, family: str | None = None, **overrides: Any) -> Preset:
    if name not in PRESETS:
        raise UsageError(f"unknown preset '{name}' (known: {', '.join(PRESETS)})")
    p = PRESETS[name]
    shape = p.shape
    if family is not None and family not in FAMILIES:
        raise UsageError(f"unknown model family '{family}' ({', '.join(FAMILIES)})")
    if family == "qwen3" and name == "8b":
        shape = QWEN3_8B
    elif family == "qwen3_moe" and name == "8b":
        shape = QWEN3_30B_A3B
    elif family == "qwen3_moe":
        shape = replace(shape, family=family, **TINY_MOE_EXPERTS)
    elif family is not None:
        shape = replace(shape, family=family)
    if layers is not None:
        if layers < 1:
            raise UsageError("--layers must be at least 1")
        shape = replace(shape, layers=layers)
    return replace(p, shape=shape, **{k: v for k, v in overrides.items() if v is not None})


def build_model(shape: ModelShape, dtype: str, device: str, seed: int) -> Any:
    """A causal LM from ``shape`` with seeded random weights (small, so that logits stay finite)."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
    )

    common: dict[str, Any] = dict(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=8192,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    model: Any
    with torch.device(device):
        if shape.family == "qwen3":
            model = Qwen3ForCausalLM(Qwen3Config(**common, use_sliding_window=False))
        elif shape.family == "qwen3_moe":
            config = Qwen3MoeConfig(
                **common,
                use_sliding_window=False,
                num_experts=shape.experts,
                num_experts_per_tok=shape.top_k,
                moe_intermediate_size=shape.moe_intermediate,
                norm_topk_prob=True,
                decoder_sparse_step=1,
                mlp_only_layers=[],
            )
            model = Qwen3MoeForCausalLM(config)
        else:
            model = LlamaForCausalLM(LlamaConfig(**common))
    return model.to(torch_dtype).eval()


@dataclass(frozen=True)
class Request:
    request_id: str
    prompt: tuple[int, ...]
    max_new_tokens: int


def requests(mix: Mix, n: int, vocab: int, seed: int, *, shared_prompt: bool = True) -> list[Request]:
    """``n`` requests of ``mix``; with ``shared_prompt`` the last one repeats the first one's prompt."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(*mix.prompt)
        prompt = tuple(rng.randrange(1, vocab) for _ in range(length))
        out.append(Request(f"r{i}", prompt, rng.randint(*mix.output)))
    if shared_prompt and n >= 3:
        out[-1] = replace(out[-1], prompt=out[0].prompt)
    return out


def arrival(reqs: list[Request], order: str, seed: int) -> list[Request]:
    if order == "given":
        return list(reqs)
    if order == "reversed":
        return list(reversed(reqs))
    if order == "shuffled":
        shuffled = list(reqs)
        random.Random(seed + 1).shuffle(shuffled)
        return shuffled
    raise UsageError(f"unknown arrival order '{order}'")
