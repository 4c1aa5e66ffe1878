"""The task catalog's names, in the order they are listed: readable without importing PyTorch.

Each name is a module of ``nodice.tasks`` exporting ``TASK``; ``nodice.tasks.get_task`` loads it.
"""

from __future__ import annotations

CATALOG = (
    "rmsnorm",
    "add_rmsnorm",
    "layernorm",
    "gemm",
    "attention_prefill",
    "attention_decode",
    "attention_varlen",
    "dsa",
    "mla_decode",
    "moe",
    "sampling",
    "gdn",
    "kda",
)
