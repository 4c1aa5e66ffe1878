"""Optional: run the load_inline CUDA candidates of this pool on a CUDA GPU.

    TRITON_INTERPRET=0 python3 bench/detector-heldout4/gpu_check_cuda.py --out bench/detector-heldout4/gpu_cuda_results.json

For each CUDA candidate: correctness against the problem's Model at cpu_batch_size
(atol = rtol = 1e-2), then a batch sweep like author_check.py (targets alone at
batch 1 versus at first / middle / last position of batches 2..512 with fresh
batchmates). Any bitwise difference => "violating".
"""
import argparse
import importlib.util
import json
import os
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_CANDIDATES = {
    "level1_29_Softplus/cuda_fast_math_large_batch": 16,
    "level1_30_Softsign/cuda_vectorized_float4": 16,
    "level1_93_masked_cumsum/cuda_blocks_per_row_by_batch": 16,
}
SIZES = [2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def inputs_at(prob, batch, seed):
    prob.batch_size = batch
    torch.manual_seed(seed)
    return [t.cuda() if isinstance(t, torch.Tensor) else t for t in prob.get_inputs()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "gpu_cuda_results.json"))
    args = ap.parse_args()
    res = []
    for key, bs in CUDA_CANDIDATES.items():
        stem, name = key.split("/")
        t0 = time.time()
        prob = load(os.path.join(HERE, "problems", stem + ".py"), "p_" + name)
        cand = load(os.path.join(HERE, "pool", stem, name + ".py"), "c_" + name)
        torch.manual_seed(42)
        ref_m = prob.Model(*prob.get_init_inputs()).cuda()
        torch.manual_seed(42)
        new_m = cand.ModelNew(*prob.get_init_inputs()).cuda()
        rec = {"key": key, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
        with torch.no_grad():
            ins = inputs_at(prob, bs, 7)
            ref = ref_m(*ins)
            got = new_m(*ins)
            rec["correct"] = bool(torch.allclose(got, ref, atol=1e-2, rtol=1e-2))
            rec["max_abs_err"] = float((got - ref).abs().max())
            targets = [inputs_at(prob, 1, 2000 + i) for i in range(3)]
            solo = [new_m(*t)[0].clone() for t in targets]
            label, ev = "invariant", {"sweep_batch_sizes": [1] + SIZES}
            for B in SIZES:
                batch = inputs_at(prob, B, 3000 + B)
                pos = [0, B // 2, B - 1] if B >= 3 else [0, 1]
                for ti, p in enumerate(pos):
                    for b, t in zip(batch, targets[ti]):
                        b[p] = t[0]
                out = new_m(*batch)
                for ti, p in enumerate(pos):
                    ne = (out[p] != solo[ti])
                    if bool(ne.any()):
                        i = int(ne.flatten().nonzero()[0])
                        label = "violating"
                        ev = {"batch_size": B, "position": p, "target": ti, "n_diff": int(ne.sum()),
                              "solo_value": float(solo[ti].flatten()[i]), "batched_value": float(out[p].flatten()[i])}
                        break
                if label == "violating":
                    break
        rec["gpu_label"] = label
        rec["evidence"] = ev
        rec["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(rec), flush=True)
        res.append(rec)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
