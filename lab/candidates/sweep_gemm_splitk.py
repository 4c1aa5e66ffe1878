"""Sweep the split-K GEMM candidate's split sizes and tiles against the bundled GEMM and cuBLAS
(GPU, bf16), after a bitwise check of its split layers.

The split layers (K >= 2N: the two down projections) are where the candidate differs from the
bundled kernel, and the gate's GPU problem (K = N = 4096) does not split, so the gate does not
see them: first, for every split layer of the task's workloads, one row computed alone (the
partials schedule) is compared bitwise with the same row inside batches of 2 ... 4096 rows at
the first, middle and last slot (both schedules), at the committed pins; one ``"impl": "bi"``
line per layer. Then ``sweep_pins.py``: the bundled kernel (``reference`` = ``bundled``) and the
task's baselines on every workload, the candidate at its own pins on every workload, and each
table below on the split layers' workloads only (elsewhere it runs the bundled computation).

    python3 lab/candidates/sweep_gemm_splitk.py --out $OUT/sweep_gemm_splitk.jsonl [--seconds 300]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Any

import torch
from sweep_pins import HERE, ROOT, Sweep, _load, main

from nodice.tasks.base import Workload

# Slice lengths: N / divisor (1, 2, 4) or pinned K elements.
SPLITS: list[dict[str, Any]] = [
    {"SPLIT_LEN_DIVISOR": 2, "SPLIT_LEN": None},
    {"SPLIT_LEN_DIVISOR": 1, "SPLIT_LEN": None},
    {"SPLIT_LEN_DIVISOR": 4, "SPLIT_LEN": None},
    {"SPLIT_LEN_DIVISOR": 2, "SPLIT_LEN": 1024},
    {"SPLIT_LEN_DIVISOR": 2, "SPLIT_LEN": 4096},
]
# Partials tiles for M <= 64 (BLOCK_M, BLOCK_N, num_warps, num_stages), and for larger M when the
# partials schedule runs there.
PARTIAL_TILES = [(64, 128, 4, 6), (64, 64, 4, 8), (64, 256, 4, 4), (64, 128, 4, 4), (128, 128, 4, 4)]
# One-pass tiles: two accumulators, at most 64 + 64 fp32 registers a thread.
ONE_PASS_TILES = [(128, 128, 8, 4), (128, 128, 8, 3), (128, 128, 8, 5), (128, 64, 4, 6)]
# Where the schedules meet.
PARTIALS_MAX_MS = [64, 16, 512]

# The pins every table starts from: the candidate's committed ones.
_KEYS = ("SPLIT_LEN_DIVISOR", "SPLIT_LEN", "PARTIALS_MAX_M", "PARTIAL_TILES", "ONE_PASS_TILE", "USE_TMA")


def _tables() -> list[dict[str, Any]]:
    """One setting changed at a time from the committed pins, the split size first; every table
    names every key, so that none carries over into the next."""
    pins = {k: getattr(_committed(), k) for k in _KEYS}
    above_64 = [list(t) for t in pins["PARTIAL_TILES"] if t[0] > 64]
    out = [{**pins, **split} for split in SPLITS[1:]]
    for bm, bn, warps, stages in PARTIAL_TILES[1:]:
        out.append({**pins, "PARTIAL_TILES": [[64, bm, bn, warps, stages], *above_64]})
    out += [{**pins, "ONE_PASS_TILE": list(tile)} for tile in ONE_PASS_TILES[1:]]
    out += [{**pins, "PARTIALS_MAX_M": m} for m in PARTIALS_MAX_MS[1:]]
    out += [{**pins, "PARTIALS_MAX_M": 512, "SPLIT_LEN_DIVISOR": 1}]
    out += [{**pins, "USE_TMA": 0}]
    return out


@functools.cache
def _committed() -> Any:
    """The candidate at its committed pins (the sweep sets pins on its own copy)."""
    return _load(HERE / "gemm_splitk.py", "gemm_splitk_committed")


def _split_layer(w: Workload) -> bool:
    return _committed().split_count(w.params["K"], w.params["N"]) > 1


def bitwise_check(out_path: str) -> None:
    """A row alone against the same row in batches of every size class, per split layer (bf16)."""
    from nodice.tasks import get_task

    cand = _committed()
    device = torch.device("cuda")
    layers = sorted({(w.params["K"], w.params["N"]) for w in get_task("gemm").workloads() if _split_layer(w)})
    gen = torch.Generator(device=device).manual_seed(0)
    with open(out_path, "a") as out:
        for k, n in layers:
            b = (torch.randn((k, n), generator=gen, device=device) / k**0.5).to(torch.bfloat16)
            target = torch.randn((1, k), generator=gen, device=device).to(torch.bfloat16)
            alone = cand.kernel(target, b)
            first_mismatch, contexts = None, 0
            for m in (2, 3, 16, 17, 64, 65, 128, 129, 512, 513, 4096):
                mates = torch.randn((m, k), generator=gen, device=device).to(torch.bfloat16)
                for slot in (0, m // 2, m - 1):
                    batch = mates.clone()
                    batch[slot] = target[0]
                    row = cand.kernel(batch, b)[slot]
                    contexts += 1
                    if first_mismatch is None and not torch.equal(
                        row.view(torch.int16), alone[0].view(torch.int16)
                    ):
                        differ = int((row.view(torch.int16) != alone[0].view(torch.int16)).sum())
                        first_mismatch = {"M": m, "slot": slot, "elements_differ": differ}
            row_out = {
                "task": "gemm",
                "impl": "bi",
                "K": k,
                "N": n,
                "slices": cand.split_count(k, n),
                "contexts": contexts,
                "bitwise": first_mismatch is None,
                "first_mismatch": first_mismatch,
            }
            out.write(json.dumps(row_out) + "\n")
            print(f"gemm_splitk K={k} N={n}: {json.dumps(row_out)}", flush=True)


PLAN = [
    Sweep(
        "gemm",
        ROOT / "nodice" / "kernels" / "gemm.py",
        "bundled",
        "gemm_splitk.py",
        _tables,
        table_workloads=_split_layer,
    )
]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    known, _ = ap.parse_known_args()
    bitwise_check(known.out)
    sys.exit(main(PLAN))
