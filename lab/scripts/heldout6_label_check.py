"""Recheck a held-out candidate's label by brute force: every sample of many random batches run alone
and at every position of batches of several sizes, bits compared (CPU, one thread, fp32).

    TRITON_INTERPRET=1 OMP_NUM_THREADS=1 \
        python3 lab/scripts/heldout6_label_check.py bench/detector-heldout6 KEY [KEY ...]

Prints, per candidate, how many (sample, batch size, position) comparisons differ from the sample
alone. Independent of nodice: the problem file and the candidate are imported as KernelBench does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import torch

SIZES = (2, 3, 5, 8, 16, 17)
DRAWS = int(os.environ.get("DRAWS", "30"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(pool: Path, key: str) -> dict:
    rec = next(r for r in json.loads((pool / "labels.json").read_text()) if r["key"] == key)
    prob = _load(pool / rec["problem"], "problem")
    cand = _load(pool / "pool" / f"{key}.py", "candidate")
    prob.batch_size = max(SIZES)
    torch.manual_seed(42)
    model = prob.Model(*prob.get_init_inputs())
    torch.manual_seed(42)
    new = cand.ModelNew(*prob.get_init_inputs())
    state = new.state_dict()
    new.load_state_dict({k: v for k, v in model.state_dict().items() if k in state}, strict=False)
    differ = total = 0
    with torch.no_grad():
        for draw in range(DRAWS):
            torch.manual_seed(1000 + draw)
            inputs = prob.get_inputs()
            x = inputs[0]
            rest = inputs[1:]
            alone = [new(x[i : i + 1].clone(), *rest) for i in range(x.shape[0])]
            for b in SIZES:
                out = new(x[:b].contiguous(), *rest)
                for i in range(b):
                    total += 1
                    differ += int(not torch.equal(out[i : i + 1], alone[i]))
    return {"key": key, "label_cpu": rec["label_cpu"], "differing": differ, "comparisons": total}


if __name__ == "__main__":
    torch.set_num_threads(1)
    pool = Path(sys.argv[1])
    for key in sys.argv[2:]:
        print(json.dumps(check(pool, key)))
