"""Is the first implementation timed on a workload's fresh inputs slower than the next ones?

decode_settings.py saw it at one attention_decode workload (qwen3-32b-b32-kv8k, after the 17 GB
qwen3-30b-a3b-b128-kv32k inputs were freed): whatever was timed first there measured ~10 % slower
than the same thing timed again. This replays that sequence and times the same copy and the same
kernel several times in a row, then again after the GPU was kept busy for a while first.
    python3 lab/scripts/first_timing.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from nodice.kernels import attention_decode as decode
from nodice.measuring.timing import time_cuda
from nodice.tasks import get_task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--before", default="qwen3-30b-a3b-b128-kv32k")
    ap.add_argument("--target", default="qwen3-32b-b32-kv8k")
    args = ap.parse_args()
    dev = torch.device("cuda")
    task = get_task("attention_decode")
    by_name = {w.name: w for w in task.workloads()}
    report: dict = {"device": torch.cuda.get_device_name(), "runs": []}
    for busy_ms in (0, 300, 0, 1000):
        gen = torch.Generator().manual_seed(0)
        big = task.workload_inputs(by_name[args.before], gen, dev, torch.bfloat16)
        decode.kernel(*big)
        torch.cuda.synchronize()
        del big
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        w = by_name[args.target]
        inputs = task.workload_inputs(w, torch.Generator().manual_seed(0), dev, torch.bfloat16)
        decode.kernel(*inputs)
        torch.cuda.synchronize()
        if busy_ms:
            torch.cuda._sleep(int(busy_ms * 1e-3 * 1.98e9))
            torch.cuda.synchronize()
        nbytes = int(task.bytes_moved(w, torch.bfloat16)) // 2
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_(0, 255)
        dst = torch.empty_like(src)
        order = ["copy", "kernel", "copy", "kernel", "copy", "kernel"]
        times = []
        for what in order:
            fn, fn_args = (dst.copy_, (src,)) if what == "copy" else (decode.kernel, inputs)
            ms = time_cuda(fn, fn_args).ms
            times.append({"what": what, "ms": round(ms, 5), "at_s": round(time.perf_counter() - t0, 3)})
        run = {"busy_ms_before": busy_ms, "times": times}
        report["runs"].append(run)
        print(json.dumps(run), flush=True)
        del inputs, src, dst
        torch.cuda.empty_cache()
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
