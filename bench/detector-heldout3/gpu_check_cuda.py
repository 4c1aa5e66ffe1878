"""Optional GPU confirmation of the CUDA-only candidates (not needed for labels.json).

The CUDA-only candidates are labelled by reasoning in labels.json. When a GPU is
available this script builds them, checks correctness against the reference at
the cpu batch size, and runs the same batch-1-vs-batched sweep as the CPU oracle
(plus batch sizes around 128/256). Usage, on a CUDA machine:

    TRITON_INTERPRET=0 python3 bench/detector-heldout3/gpu_check_cuda.py [--out results.json]
"""
import os

os.environ["TRITON_INTERPRET"] = "0"
import argparse
import json
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import author_check as ac  # noqa: E402

GPU_SWEEP = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257]


def to_dev(ins):
    return [t.cuda() if isinstance(t, torch.Tensor) else t for t in ins]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for key, (intended, mech, lang, obs, desc) in ac.CANDIDATES.items():
        if "cpu" in obs:
            continue
        stem, name = key.split("/")
        level, cpu_bs, profile, coupling = ac.PROBLEMS[stem]
        path = os.path.join(ac.HERE, "pool", stem, name + ".py")
        rec = {"key": key, "intended": intended, "device": torch.cuda.get_device_name(0)}
        t0 = time.time()
        try:
            prob = ac.load_problem(stem)
            ref_model = ac.build(prob.Model, prob).cuda()
            cmod = ac.load_module(path, "gpu_" + name)
            new = ac.build(cmod.ModelNew, prob).cuda()
            ins = to_dev(ac.inputs_at(prob, cpu_bs, 7))
            ref = ac.run(ref_model, ins)
            got = ac.run(new, ins)
            rec["correct"] = bool(torch.allclose(got.float(), ref.float(), atol=1e-2, rtol=1e-2))
            rec["max_abs_err"] = float((got.double() - ref.double()).abs().max())
            targets = [to_dev(ac.inputs_at(prob, 1, 2000 + i)) for i in range(3)]
            solo = [ac.run(new, t) for t in targets]
            verdict, ev = "invariant", None
            tried = []
            for B in GPU_SWEEP[1:]:
                if B * max(t.numel() for t in targets[0] if isinstance(t, torch.Tensor)) > 1_000_000_000:
                    continue
                batch = to_dev(ac.inputs_at(prob, B, 3000 + B))
                positions = []
                for p in (0, B // 2, B - 1):
                    if p not in positions:
                        positions.append(p)
                for ti, p in enumerate(positions):
                    ac.place(batch, targets[ti], p)
                out = ac.run(new, batch)
                tried.append(B)
                for ti, p in enumerate(positions):
                    d = ac.first_diff(solo[ti][0].cpu(), out[p].cpu())
                    if d is not None:
                        verdict = "violating"
                        d.update(batch_size=B, position=p, target=ti)
                        ev = d
                        break
                if ev:
                    break
            rec["gpu_label"] = verdict
            rec["evidence"] = ev or {"sweep_batch_sizes": [1] + tried}
        except Exception as e:
            rec["gpu_label"] = "error"
            rec["error"] = repr(e)[-600:]
        rec["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(rec), flush=True)
        results.append(rec)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
