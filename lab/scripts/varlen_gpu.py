"""The ragged prefill candidate's Hopper path against the seed's flash forward and an fp32 reference,
on packs the task's own inputs never have: keys ahead of the queries (a prompt chunk over a cache),
non-causal, head dims 64 and 128, bf16 and fp16; then a sequence alone against the same sequence
inside packs of other lengths, bit for bit. JSON is written after every case.

    python3 lab/scripts/varlen_gpu.py --json OUT.json [--candidate lab/candidates/attention_varlen_gluon.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pack(q_lens: list[int], k_lens: list[int], hq: int, hkv: int, d: int, dtype: torch.dtype, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype, generator=gen)
    cu_q = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, *torch.tensor(k_lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    return q, k, v, cu_q, cu_k


def _reference(q, k, v, cu_q, cu_k, causal: bool, scale: float) -> torch.Tensor:
    """fp32 attention per sequence, the causal mask aligned bottom-right."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    group = q.shape[1] // k.shape[1]
    qb, kb = cu_q.tolist(), cu_k.tolist()
    for qs, qe, ks, ke in zip(qb, qb[1:], kb, kb[1:], strict=False):
        qq = q[qs:qe].float().transpose(0, 1)
        kk = k[ks:ke].float().repeat_interleave(group, 1).transpose(0, 1)
        vv = v[ks:ke].float().repeat_interleave(group, 1).transpose(0, 1)
        s = qq @ kk.transpose(1, 2) * scale
        if causal:
            nq, nk = qe - qs, ke - ks
            cols, rows = torch.arange(nk, device=q.device), torch.arange(nq, device=q.device)
            keep = cols[None, :] <= rows[:, None] + (nk - nq)
            s = s.masked_fill(~keep, float("-inf"))
        out[qs:qe] = (F.softmax(s, -1) @ vv).transpose(0, 1)
    return out


CASES = [
    # (name, q_lens, k_lens, hq, hkv, d, causal)
    ("equal-causal-d128", [300, 1, 129, 2048, 64], [300, 1, 129, 2048, 64], 32, 8, 128, True),
    ("ahead-causal-d128", [17, 200, 128, 1, 700], [517, 200, 4096, 33, 1500], 32, 8, 128, True),
    ("ahead-noncausal-d128", [17, 200, 1], [517, 333, 64], 16, 4, 128, False),
    ("equal-noncausal-d64", [300, 7, 1000], [300, 7, 1000], 8, 8, 64, False),
    ("ahead-causal-d64-mqa", [65, 128, 3], [65, 1000, 130], 8, 1, 64, True),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    default = ROOT / "lab" / "candidates" / "attention_varlen_gluon.py"
    ap.add_argument("--candidate", type=Path, default=default)
    args = ap.parse_args()
    cand = _load(args.candidate, "varlen_candidate")
    seed_mod = _load(ROOT / "nodice" / "examples" / "attention_varlen" / "seed.py", "varlen_seed")
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "cases": [], "alone": []}

    def dump() -> None:
        args.json.write_text(json.dumps(results, indent=1))

    for dtype in (torch.bfloat16, torch.float16):
        for name, q_lens, k_lens, hq, hkv, d, causal in CASES:
            q, k, v, cu_q, cu_k = _pack(q_lens, k_lens, hq, hkv, d, dtype, 0)
            scale = d**-0.5
            call = (q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal, scale)
            row: dict[str, Any] = {"case": name, "dtype": str(dtype).removeprefix("torch.")}
            try:
                got = cand.kernel(*call).float()
                torch.cuda.synchronize()
            except Exception as exc:  # the finding
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                results["cases"].append(row)
                dump()
                continue
            seed_out = seed_mod.kernel(*call).float()
            ref = _reference(q, k, v, cu_q, cu_k, causal, scale)
            row["max_err_candidate"] = float((got - ref).abs().max())
            row["max_err_seed"] = float((seed_out - ref).abs().max())
            row["finite"] = bool(torch.isfinite(got).all())
            row["ok"] = row["finite"] and row["max_err_candidate"] <= 2 * row["max_err_seed"] + 1e-2
            results["cases"].append(row)
            print(json.dumps(row), flush=True)
            dump()

    # A sequence alone against the same sequence inside packs of other lengths (keys ahead too).
    gen = torch.Generator().manual_seed(1)
    for causal in (True, False):
        q1, k1, v1, _, _ = _pack([333], [900], 32, 8, 128, torch.bfloat16, 5)
        alone = cand.kernel(
            q1,
            k1,
            v1,
            *[torch.tensor([0, n], dtype=torch.int32, device="cuda") for n in (333, 900)],
            333,
            900,
            causal,
            128**-0.5,
        )
        differ = 0
        for trial in range(6):
            others = int(torch.randint(1, 40, (1,), generator=gen))
            slot = int(torch.randint(0, others + 1, (1,), generator=gen))
            ql = [int(x) for x in torch.randint(1, 3000, (others,), generator=gen)]
            kl = [n + int(torch.randint(0, 500, (1,), generator=gen)) for n in ql]
            ql.insert(slot, 333)
            kl.insert(slot, 900)
            q, k, v, cu_q, cu_k = _pack(ql, kl, 32, 8, 128, torch.bfloat16, 100 + trial)
            qs, ks = int(cu_q[slot]), int(cu_k[slot])
            q[qs : qs + 333], k[ks : ks + 900], v[ks : ks + 900] = q1, k1, v1
            out = cand.kernel(q, k, v, cu_q, cu_k, max(ql), max(kl), causal, 128**-0.5)
            same = torch.equal(out[qs : qs + 333], alone)
            differ += not same
            results["alone"].append({"causal": causal, "batch": others + 1, "slot": slot, "same_bits": same})
        print(f"alone vs packed, causal={causal}: {differ} of 6 differ", flush=True)
        dump()
    results["all_ok"] = all(r.get("ok") for r in results["cases"]) and all(
        r["same_bits"] for r in results["alone"]
    )
    dump()
    print("all_ok", results["all_ok"], flush=True)
    if not results["all_ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
