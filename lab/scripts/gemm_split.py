"""The gemm kernel's SPLIT_K pin on the GPU: bits across M, then time against the shipped sum and cuBLAS.

For each layer of the gemm task and each M in --sizes: nodice's gemm as shipped (one fp32 running
sum over K), the same kernel with SPLIT_K on (fixed K segments of SPLIT_SEG_K summed in order) and
torch.mm (cuBLAS), timed with nodice's own timer (CUDA events, L2 flushed). Before timing, row 0's
bits with SPLIT_K on are compared at M = 1 against every M of --bit-sizes (bf16). JSON is written
after every row.
    python3 lab/scripts/gemm_split.py --json OUT.json [--seg-k 2048 1024] [--sizes 1 16 64 512]
        [--max-m 1024] [--layers qwen3-32b-down qwen3-32b-qkv]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

import torch

from nodice.measuring.timing import time_cuda
from nodice.tasks.gemm import _LAYERS

KERNEL = Path(__file__).resolve().parents[2] / "nodice" / "kernels" / "gemm.py"


def _module(split: int, seg_k: int, max_m: int | None = None):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"gemm_split_{split}_{seg_k}", KERNEL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.SPLIT_K, mod.SPLIT_SEG_K = split, seg_k
    if max_m is not None:
        mod.SPLIT_MAX_M = max_m
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--seg-k", type=int, nargs="+", default=[2048, 1024])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 512])
    ap.add_argument("--max-m", type=int, help="SPLIT_MAX_M: segments as their own programs up to this M")
    ap.add_argument("--layers", nargs="+", help="only these layers (TAG-PROJ, e.g. qwen3-32b-down)")
    ap.add_argument("--bit-sizes", type=int, nargs="+", default=[2, 16, 17, 64, 65, 129, 512, 4096])
    args = ap.parse_args()
    dev = torch.device("cuda")
    shipped = _module(0, 2048)
    report: dict = {
        "device": torch.cuda.get_device_name(),
        "commit": os.environ.get("NODICE_COMMIT", ""),
        "rows": [],
        "split_max_m": args.max_m,
    }
    report["bits"] = []
    gen = torch.Generator(device=dev).manual_seed(0)
    for seg_k in args.seg_k:
        split = _module(1, seg_k, args.max_m)
        for model, tag, proj, k, n in _LAYERS:
            if split._split_segments(k) < 2 or (args.layers and f"{tag}-{proj}" not in args.layers):
                continue
            b = torch.randn((k, n), generator=gen, device=dev, dtype=torch.bfloat16)
            a = torch.randn((max(args.bit_sizes), k), generator=gen, device=dev, dtype=torch.bfloat16)
            alone = split.kernel(a[:1].contiguous(), b)[0]
            differ = [
                m for m in args.bit_sizes if not torch.equal(split.kernel(a[:m].contiguous(), b)[0], alone)
            ]
            report["bits"].append(
                {"seg_k": seg_k, "layer": f"{tag}-{proj}", "K": k, "N": n, "rows_differing_at": differ}
            )
            print(f"bits seg_k={seg_k} {tag}-{proj}: row 0 differs at M = {differ or 'none'}", flush=True)
            for m in args.sizes:
                x = (
                    a[:m].contiguous()
                    if m <= a.shape[0]
                    else torch.randn((m, k), generator=gen, device=dev, dtype=torch.bfloat16)
                )
                t = {}
                for name, fn in (("shipped", shipped.kernel), ("split", split.kernel), ("cublas", torch.mm)):
                    t[name] = time_cuda(fn, (x, b)).ms
                row = {
                    "seg_k": seg_k,
                    "layer": f"{tag}-{proj}",
                    "model": model,
                    "M": m,
                    "K": k,
                    "N": n,
                    **{f"{key}_ms": round(v, 5) for key, v in t.items()},
                }
                row["split_vs_shipped"] = round(t["shipped"] / t["split"], 3)
                row["split_vs_cublas"] = round(t["cublas"] / t["split"], 3)
                row["shipped_vs_cublas"] = round(t["cublas"] / t["shipped"], 3)
                report["rows"].append(row)
                times = " ".join(f"{key} {v:.4f}" for key, v in t.items())
                ratios = f"split/shipped {row['split_vs_shipped']}x split/cublas {row['split_vs_cublas']}x"
                print(f"seg_k={seg_k} {tag}-{proj} M={m}: {times} ms; {ratios}", flush=True)
                report["written"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
