"""nodice inside Hugging Face transformers: batch-invariant attention, norms, GEMMs and sampling.

``enable(model)`` turns it on for one model (see :mod:`.enable`); importing this package also
registers ``"nodice"`` and ``"paged|nodice"`` in transformers' ``AttentionInterface`` (and
SDPA's mask function for ``"nodice"``, so padded batches are seen and fall back), and the
recording schedulers in continuous batching, so that ``attn_implementation="nodice"`` works in
``from_pretrained`` or ``from_config``. Needs the ``transformers`` extra
(``pip install 'nodice[transformers]'``).
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    # Triton decides when triton.language is imported whether its own helpers are interpreted;
    # transformers imports it, so on a machine without a GPU the interpreter must be on first.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from nodice.integrations.transformers.enable import (
    Integration,
    IntegrationReport,
    RoutedRMSNorm,
    continuous_batching_config,
    enable,
)
from nodice.integrations.transformers.kernels import CallStats
from nodice.integrations.transformers.registry import register
from nodice.integrations.transformers.sampler import LogitsRecord, NodiceSampler, SamplingParams

__all__ = [
    "CallStats",
    "Integration",
    "IntegrationReport",
    "LogitsRecord",
    "NodiceSampler",
    "RoutedRMSNorm",
    "SamplingParams",
    "continuous_batching_config",
    "enable",
    "register",
]

register()
