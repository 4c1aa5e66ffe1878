"""What cuBLASLt's heuristic picks with and without workspace on the gemm task's GPU shapes, and whether
the two invariant baselines (cuBLASLt without split-K, sgemm-bi) give a row the same bits at every M.

    PYTHONPATH=$PWD:/tmp/nodice-site python3 lab/scripts/gemm_baselines.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch

from nodice.measuring.baselines import load_baselines
from nodice.measuring.baselines.cublaslt import chosen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    dev = torch.device("cuda")
    loaded, missing = load_baselines("gemm", dev)
    out: dict = {"device": torch.cuda.get_device_name(), "missing": missing, "shapes": []}
    gen = torch.Generator(device=dev).manual_seed(0)
    for k, n in [(4096, 4096), (4096, 14336), (14336, 4096), (4096, 128256)]:
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=gen)
        rows = torch.randn(512, k, device=dev, dtype=torch.bfloat16, generator=gen)
        for m in (1, 8, 64, 512):
            a = rows[:m].contiguous()
            entry = {"m": m, "k": k, "n": n, "cublaslt_no_workspace": chosen(a, b)}
            for name, impl in loaded.items():
                first_row = impl(a, b)[:1]
                alone = impl(rows[:1].contiguous(), b)
                entry[f"{name}: row 0 same bits as alone"] = bool(torch.equal(first_row, alone))
            out["shapes"].append(entry)
            print(json.dumps(entry), flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
