"""Sweep the bundled MoE kernel's wide-expert table against the seed and the grouped-GEMM baselines
(GPU, bf16), after a bitwise check of the wide table.

The wide table (``nodice/kernels/moe.py``; written first as a candidate, bundled 2026-12-04) serves
only models with few, wide experts (Mixtral-8x7B among the workloads), and the gate's GPU problem
(128 experts of 256 columns) does not select the wide table, so the gate does not see it. First, at
every few-expert model of the task's workloads, one token computed alone is compared bitwise with
the same token inside batches of 2 … 4096 tokens (first, middle and last slot; batchmates routed at
random or onto the token's own experts), at the committed pins, then (a shorter set, while
``--check-seconds`` last) at each table below; one ``"impl": "bi"`` line per setting. Then
``sweep_pins.py``: the seed (``reference`` = ``seed``) and the task's baselines on every workload,
the bundled kernel at its own pins on every workload, and each table below on the few-expert
workloads only (elsewhere the kernel runs the many-expert table, which the tables do not touch).

    python3 lab/candidates/sweep_moe_wide.py --out $OUT/sweep_moe_wide.jsonl [--seconds 100]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

import torch
from sweep_pins import ROOT, Sweep, _load, _sticky, main

from nodice.tasks.base import Workload

BUNDLED = ROOT / "nodice" / "kernels" / "moe.py"

# Every table names every key, so that no setting carries over into the next.
_KEYS = (
    "WIDE_BLOCK_M",
    "WIDE_GATE_UP_BLOCK_N",
    "WIDE_DOWN_BLOCK_N",
    "WIDE_GATE_UP_WARPS",
    "WIDE_GATE_UP_STAGES",
    "WIDE_DOWN_WARPS",
    "WIDE_DOWN_STAGES",
    "WIDE_DESCRIPTORS",
    "WIDE_GROUPED_X",
    "WIDE_GROUP_M",
)

# Changes from the committed pins (128 × 128 tiles in both GEMMs, 8 warps, 3 stages, pointer
# loads, x copied into expert order, groups of 8 expert tiles), likeliest first. Gate/up keeps two
# accumulators (gate and up) of BLOCK_M × BLOCK_N, so its 128-column tile already feeds 256 weight
# columns per K step; a 128 × 256 gate/up tile would need 512 fp32 registers a thread. The first
# sweep (2026-12-04, TMA descriptors then on) measured the tables below with descriptors; pointer
# loads won at decode and tied at prefill, and became the pin.
CHANGES: list[dict[str, Any]] = [
    # The 2026-12-02 sweep's best at mixtral-8x7b-prefill4k, as it ran there (465 TFLOP/s).
    {"WIDE_GROUPED_X": False, "WIDE_GROUP_M": 0},
    {"WIDE_DESCRIPTORS": None},
    {"WIDE_DESCRIPTORS": None, "WIDE_DOWN_BLOCK_N": 256, "WIDE_DOWN_STAGES": 4},
    {"WIDE_DOWN_BLOCK_N": 256},
    {"WIDE_DOWN_BLOCK_N": 256, "WIDE_DOWN_STAGES": 4},
    {"WIDE_GROUP_M": 0},
    {"WIDE_GATE_UP_STAGES": 4, "WIDE_DOWN_STAGES": 4},
    {"WIDE_GROUP_M": 16},
    {"WIDE_BLOCK_M": 256, "WIDE_GATE_UP_BLOCK_N": 64},
    {"WIDE_GROUPED_X": False},
]


@functools.cache
def _committed() -> Any:
    """The kernel at its committed pins (the sweep sets pins on its own copy)."""
    return _load(BUNDLED, "moe_wide_committed")


def _pins() -> dict[str, Any]:
    return {k: getattr(_committed(), k) for k in _KEYS}


def _tables() -> list[dict[str, Any]]:
    pins = _pins()
    return [{**pins, **change} for change in CHANGES]


def _few_experts(w: Workload) -> bool:
    p = w.params
    return bool(_committed().is_wide(p["E"], p["top_k"], p["H"], p["I"]))


def _bitwise(cand: Any, model: tuple[int, int, int, int], sizes, gen: torch.Generator) -> dict[str, Any]:
    """One token alone against the same token inside batches of ``sizes`` tokens (bf16, bitwise)."""
    e, k, h, i = model
    device = torch.device("cuda")
    dt = torch.bfloat16
    w_gate_up = (torch.randn((e, 2 * i, h), generator=gen, device=device) / h**0.5).to(dt)
    w_down = (torch.randn((e, h, i), generator=gen, device=device) / i**0.5).to(dt)
    x = torch.randn((1, h), generator=gen, device=device).to(dt)
    logits = torch.randn((1, e), generator=gen, device=device) * 1.5
    alone = cand.kernel(x, logits, w_gate_up, w_down, k)[0].view(torch.int16)
    own = torch.topk(logits[0], k).indices
    first_mismatch, contexts = None, 0
    for t in sizes:
        for toward in (False, True):
            mates_x = torch.randn((t, h), generator=gen, device=device).to(dt)
            mates_logits = torch.randn((t, e), generator=gen, device=device) * 1.5
            if toward:  # the mates fill the token's own experts
                mates_logits[:, own] += 8.0
            for slot in sorted({0, t // 2, t - 1}):
                bx, bl = mates_x.clone(), mates_logits.clone()
                bx[slot], bl[slot] = x[0], logits[0]
                row = cand.kernel(bx, bl, w_gate_up, w_down, k)[slot].view(torch.int16)
                contexts += 1
                if first_mismatch is None and not torch.equal(row, alone):
                    differ = int((row != alone).sum())
                    first_mismatch = {"T": t, "toward": toward, "slot": slot, "elements_differ": differ}
    del w_gate_up, w_down
    torch.cuda.empty_cache()
    return {"contexts": contexts, "bitwise": first_mismatch is None, "first_mismatch": first_mismatch}


def bitwise_check(out_path: str, seconds: float) -> bool:
    """The committed pins on every batch size class, then each table on a few, per few-expert model.
    True when a fault left the CUDA context unusable (the sweep cannot run after it)."""
    from nodice.tasks import get_task

    cand = _load(BUNDLED, "moe_wide_bi")
    pins = _pins()
    models = sorted(
        {
            (w.params["E"], w.params["top_k"], w.params["H"], w.params["I"])
            for w in get_task("moe").workloads()
        }
    )
    models = [m for m in models if cand.is_wide(*m)]
    gen = torch.Generator(device="cuda").manual_seed(0)
    deadline = time.monotonic() + seconds
    with open(out_path, "a") as out:
        for n, table in enumerate([pins, *_tables()]):
            if n and time.monotonic() > deadline:
                print("moe_wide bitwise: out of time for the remaining tables", flush=True)
                break
            for key, value in table.items():
                setattr(cand, key, value)
            sizes = (2, 3, 17, 64, 129, 256, 1024, 4096) if n == 0 else (17, 4096)
            for e, k, h, i in models:
                lost = False
                try:
                    result = _bitwise(cand, (e, k, h, i), sizes, gen)
                except Exception as exc:  # a setting that does not compile or run
                    result = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                    lost = _sticky(exc)
                row = {"task": "moe", "impl": "bi", "setting": table, "E": e, "top_k": k, "H": h, "I": i}
                row.update(result)
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"moe_wide bitwise: {json.dumps(row)}", flush=True)
                if lost:
                    print(
                        "moe_wide bitwise: the CUDA context is lost; rerun without this setting", flush=True
                    )
                    return True
    return False


PLAN = [
    Sweep(
        "moe",
        ROOT / "nodice" / "examples" / "moe" / "seed.py",
        "seed",
        BUNDLED,
        _tables,
        table_workloads=_few_experts,
    )
]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--check-seconds", type=float, default=60.0, help="for the tables' bitwise checks")
    known, rest = ap.parse_known_args()
    if bitwise_check(known.out, known.check_seconds):
        sys.exit(3)
    sys.argv = [sys.argv[0], "--out", known.out, *rest]  # the rest (--seconds) is sweep_pins'
    sys.exit(main(PLAN))
