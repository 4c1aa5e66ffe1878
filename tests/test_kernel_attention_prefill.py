"""The bundled attention prefill kernel's path choice (CPU): which forward runs depends on the
sequence length, the head dim, the dtype and the device, never on the batch or the head count."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
import torch

from tests.conftest import ROOT

KERNEL = ROOT / "nodice" / "kernels" / "attention_prefill.py"


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attention_prefill_bundled", KERNEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seq_len", [45, 128, 200, 256, 384, 512, 2048, 4096, 4100])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_persistent_path_follows_the_sequence_alone(mod: ModuleType, seq_len: int, head_dim: int) -> None:
    chosen = {
        mod._persistent_ok(torch.empty(batch, heads, seq_len, head_dim, device="meta"))
        for batch in (1, 2, 3, 64, 257)
        for heads in (1, 16, 32)
    }
    assert chosen == {seq_len % 128 == 0}


def test_cpu_tensors_take_the_portable_path(mod: ModuleType) -> None:
    q = torch.empty(2, 4, 256, 128, dtype=torch.bfloat16)
    assert not mod._hopper_path(q)  # the Gluon forwards are for CUDA tensors on Hopper only
