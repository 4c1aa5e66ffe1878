"""Sweep the causal walk order of the bundled prefill kernel's persistent path (GPU, bf16), after a
bitwise check of each order against the head-by-head one.

``nodice/kernels/attention_prefill.py`` walks causal tiles in groups of ``CAUSAL_HEAD_GROUP``
heads, the group's tiles interleaved longest first. The order decides which program runs a tile
and when, never what the tile computes, so every group size must give the head-by-head order's
output bit for bit: first, per group size, causal shapes whose head count leaves a partial last
group (3, 5, 6, 12 sequence-heads; S = 512 … 2048) are compared bitwise with group size 1 (one
``"impl": "bi"`` line each). Then ``sweep_pins.py``: the kernel at group size 1 (``reference`` =
``head_by_head``), the task's baselines on every workload, the committed pin on every workload, and
each group size on the causal workloads.

    python3 lab/candidates/sweep_prefill_order.py --out $OUT/sweep_prefill_order.jsonl [--seconds 240]

``--balance`` (any machine, no GPU) prints, per SPEC shape and group size, how much more work the
busiest of 132 programs gets than the average under the walk (a tile's work counted as its key
blocks plus one for its set-up), from the same tile order as the kernel's ``_tile``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch
from sweep_pins import ROOT, Sweep, _load, main

from nodice.tasks.base import Workload

BUNDLED = ROOT / "nodice" / "kernels" / "attention_prefill.py"
GROUPS = (2, 4, 8, 16)


def _tables() -> list[dict[str, Any]]:
    return [{"CAUSAL_HEAD_GROUP": g} for g in GROUPS]


def _causal(w: Workload) -> bool:
    return bool(w.params.get("causal"))


def _walk(batch: int, heads: int, seq_len: int, group: int) -> list[int]:
    """Key blocks of the causal tiles in the kernel's walk order (``_tile``), BLOCK_M = BLOCK_N = 128."""
    m_blocks = seq_len // 128
    total = batch * heads
    work = []
    for tile in range(total * m_blocks):
        span = group * m_blocks
        first = (tile // span) * group
        heads_here = min(total - first, group)
        m_block = m_blocks - 1 - (tile % span) // heads_here
        work.append(m_block + 1)
    return work


def excess(batch: int, heads: int, seq_len: int, group: int, programs: int = 132) -> float:
    """The busiest program's work over the average one's, program p taking tiles p, p + P, ..."""
    loads = [0] * programs
    for tile, blocks in enumerate(_walk(batch, heads, seq_len, group)):
        loads[tile % programs] += blocks + 1
    return max(loads) / (sum(loads) / programs) - 1


def balance() -> None:
    shapes = [(32768 // s, h, s) for h in (16, 32) for s in (4096, 8192, 16384, 32768)]
    shapes += [(16, 32, 2048), (64, 32, 512)]
    print("B  heads  S      " + "  ".join(f"group {g:>2}" for g in (1, *GROUPS)))
    for b, h, s in shapes:
        cells = "  ".join(f"{100 * excess(b, h, s, g):7.1f} %" for g in (1, *GROUPS))
        print(f"{b:<3}{h:>5}  {s:<6} {cells}")


def bitwise_check(out_path: str) -> bool:
    """Each group size against group size 1, bitwise. True when every output matched."""
    ref = _load(BUNDLED, "prefill_order_ref")
    ref.CAUSAL_HEAD_GROUP = 1
    cand = _load(BUNDLED, "prefill_order_cand")
    gen = torch.Generator(device="cuda").manual_seed(0)
    ok = True
    shapes = [(1, 3, 3, 1024), (1, 5, 5, 512), (2, 3, 1, 2048), (3, 4, 2, 512), (1, 12, 4, 1024)]
    with open(out_path, "a") as out:
        for b, hq, hkv, s in shapes:
            q = torch.randn((b, hq, s, 128), generator=gen, device="cuda").to(torch.bfloat16)
            k = torch.randn((b, hkv, s, 128), generator=gen, device="cuda").to(torch.bfloat16)
            v = torch.randn((b, hkv, s, 128), generator=gen, device="cuda").to(torch.bfloat16)
            want = ref.kernel(q, k, v, True, 128**-0.5).view(torch.int16)
            for g in GROUPS:
                cand.CAUSAL_HEAD_GROUP = g
                got = cand.kernel(q, k, v, True, 128**-0.5).view(torch.int16)
                same = torch.equal(got, want)
                ok &= same
                row = {"task": "attention_prefill", "impl": "bi", "setting": {"CAUSAL_HEAD_GROUP": g}}
                row.update(B=b, Hq=hq, Hkv=hkv, S=s, bitwise=same, elements_differ=int((got != want).sum()))
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"prefill order bitwise: {json.dumps(row)}", flush=True)
    return ok


PLAN = [
    Sweep(
        "attention_prefill",
        BUNDLED,
        "head_by_head",
        BUNDLED,
        _tables,
        table_workloads=_causal,
        reference_pins={"CAUSAL_HEAD_GROUP": 1},
    )
]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--balance", action="store_true", help="print the walk's load balance and stop")
    known, rest = ap.parse_known_args()
    if known.balance:
        balance()
        sys.exit(0)
    if not known.out:
        ap.error("--out is required")
    if not bitwise_check(known.out):
        print("prefill order: a group size changed the output; the sweep is not run", flush=True)
        sys.exit(3)
    sys.argv = [sys.argv[0], "--out", known.out, *rest]  # the rest (--seconds) is sweep_pins'
    sys.exit(main(PLAN))
