"""GPU smoke test of the candidates, before the gate: correct, bitwise batch-invariant, how fast.

    python3 lab/candidates/smoke_gpu.py [--candidate NAME ...] [--sweep] [--profile NAME]

Per candidate, in bf16 on the current GPU:
1. correctness against an fp32 reference on a few small shapes (MHA/GQA, causal or not,
   S = 200 and 256 for attention; M = 1, 64, 257 for gemm), with the task's tolerance;
2. batch invariance, bitwise: one sample alone, then inside batches of 2, 3, 8 (and 33 for
   gemm) at the first, a middle and the last slot, with fresh batchmates;
3. throughput of the pinned configuration on two representative workloads (CUDA events,
   L2 flushed between runs), and with ``--sweep`` the alternatives the candidates list in
   ``SWEEP_TILES`` on the same workloads, so a better pin can be chosen from measurements.

A failing candidate costs seconds here instead of minutes in the gate. Results go to
``$OUT/smoke.json`` (``--report``; rewritten after every step) and to stdout; the exit status is 1 if any
candidate failed step 1 or 2. ``--profile NAME`` runs NAME's first workload once, for ncu.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the repository root, for nodice

from nodice.tasks import get_task  # noqa: E402

OUT = Path(os.environ.get("OUT", "."))
REPORT: dict = {"torch": torch.__version__, "candidates": {}}
# --device cpu is a dry run of this script under Triton's interpreter: fp32, no timing.
DEVICE = torch.device("cuda")
DTYPE = torch.bfloat16

# (candidate file, task)
CANDIDATES = {
    "attention_prefill_tma_ws": "attention_prefill",
    "gemm_persistent_tma": "gemm",
    "attention_prefill_gluon": "attention_prefill",  # the bundled kernel (Gluon forwards)
}
# Candidates that became bundled kernels are read from there.
BUNDLED = {"attention_prefill_gluon": HERE.parents[1] / "nodice" / "kernels" / "attention_prefill.py"}
# Two workloads per task from the task's benchmark grid: the flagship shape causal and not,
# and for gemm a narrow layer at decode and prefill plus a wide layer at decode.
TIMED = {
    "attention_prefill": ["gqa32x8-s4k-causal", "gqa32x8-s4k-full", "gqa32x8-s8k-causal", "gqa32x8-s8k-full"],
    "gemm": [
        "llama3-8b-o-decode",
        "llama3-8b-o-prefill",
        "llama3-8b-gate_up-decode",
        "llama3-8b-down-decode",
    ],
}


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BUNDLED.get(name, HERE / f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


REPORT_NAME = "smoke.json"


def save() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / REPORT_NAME).write_text(json.dumps(REPORT, indent=1))


def first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a != b).nonzero()
    idx = tuple(diff[0].tolist())
    return (
        f"{int((a != b).sum())} of {a.numel()} differ, first at {idx}: {a[idx].item()!r} vs {b[idx].item()!r}"
    )


def correctness(task, fn, problems) -> list[str]:
    errors = []
    gen = torch.Generator().manual_seed(7)
    tol = task.tolerance(DTYPE)
    for variant in problems:
        problem = task.problem(gen, DEVICE, DTYPE, **variant)
        args = task.compose(problem, task.samples(problem, gen, 3), gen)
        got = fn(*args)
        want = task.reference(*args)
        err = (got.float() - want.float()).abs().max().item()
        ok = torch.allclose(got.float(), want.float(), atol=tol.atol, rtol=tol.rtol)
        print(
            f"    correctness {variant or problem.dims}: max_abs_err={err:.3g} {'ok' if ok else 'FAIL'}",
            flush=True,
        )
        if not ok:
            errors.append(f"incorrect on {variant or problem.dims}: max_abs_err={err:.3g}")
    return errors


def invariance(task, fn, problems, sizes) -> list[str]:
    errors = []
    gen = torch.Generator().manual_seed(11)
    for variant in problems:
        problem = task.problem(gen, DEVICE, DTYPE, **variant)
        target = task.samples(problem, gen, 1)[0]
        args = task.compose(problem, [target], gen)
        alone = task.select(fn(*args), 0, args)[0].clone()
        for batch in sizes:
            for slot in sorted({0, batch // 2, batch - 1}):
                mates = task.samples(problem, gen, batch - 1)
                args = task.compose(problem, [*mates[:slot], target, *mates[slot:]], gen)
                out = task.select(fn(*args), slot, args)[0]
                if not torch.equal(out, alone):
                    errors.append(
                        f"BI violation {variant or problem.dims} batch={batch} slot={slot}: "
                        f"{first_difference(out, alone)}"
                    )
        print(
            f"    invariance {variant or problem.dims} batches {sizes}: {'FAIL' if errors else 'ok'}",
            flush=True,
        )
    return errors


def throughput(task, call, workload) -> float:
    """TFLOP/s of ``call`` on the workload's inputs: median of CUDA-event timings, L2 flushed."""
    gen = torch.Generator().manual_seed(3)
    args = task.workload_inputs(workload, gen, torch.device("cuda"), torch.bfloat16)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    call(*args)  # compile and warm up
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = sorted(times)[len(times) // 2]
    return task.flops(workload) / (ms * 1e-3) / 1e12


def variants(name: str, mod):
    """(label, callable) for the pinned configuration and, for the sweep, each alternative."""
    yield "pinned", mod.kernel
    if name == "attention_prefill_tma_ws":
        seen = set()
        for tiles_list in mod.SWEEP_TILES.values():
            for tiles in tiles_list:
                if tiles not in seen:
                    seen.add(tiles)
                    yield f"tiles={tiles}", lambda q, k, v, c, s, t=tiles: mod.forward(q, k, v, c, s, tiles=t)
    elif name == "gemm_persistent_tma":
        for tiles in mod.SWEEP_TILES:
            for ws in (False, True):
                yield (
                    f"tiles={tiles} ws={ws}",
                    lambda a, b, t=tiles, w=ws: mod.matmul(a, b, tiles=t, warp_specialize=w),
                )


def smoke(name: str, sweep: bool, deadline: float) -> bool:
    task = get_task(CANDIDATES[name])
    entry: dict = {"task": task.name, "errors": [], "throughput": {}}
    REPORT["candidates"][name] = entry
    print(f"== {name} ({task.name})", flush=True)
    t0 = time.perf_counter()
    try:
        mod = load(name)
        if DEVICE.type == "cpu":
            problems = (
                [{"layout": "gqa", "causal": True, "seq_len": 45}]
                if task.name == "attention_prefill"
                else [{}]
            )
            bi_problems, sizes = problems, [2, 3]
        elif task.name == "attention_prefill":
            problems = [
                {"layout": "gqa", "causal": True, "seq_len": 200},
                {"layout": "mha", "causal": False, "seq_len": 256},
                {"layout": "gqa4", "causal": False, "seq_len": 200},
                {"layout": "mha", "causal": True, "seq_len": 384},
            ]
            bi_problems = problems[:2]
            sizes = [2, 3, 8]
        else:
            problems = [{}]
            bi_problems = [{}]
            sizes = [2, 3, 8, 33, 257]
        entry["errors"] += correctness(task, mod.kernel, problems)
        entry["errors"] += invariance(task, mod.kernel, bi_problems, sizes)
    except Exception as exc:  # a crash is a result
        entry["errors"].append(f"{type(exc).__name__}: {str(exc).strip()[:500]}")
        traceback.print_exc()
    entry["check_s"] = round(time.perf_counter() - t0, 1)
    save()
    if entry["errors"]:
        print(f"  FAILED: {entry['errors'][:3]}", flush=True)
        return False
    if DEVICE.type == "cpu":
        return True
    workloads = {w.name: w for w in task.workloads()}
    for label, call in variants(name, mod):
        if label != "pinned" and (not sweep or time.time() > deadline):
            continue
        for wname in TIMED[task.name]:
            try:
                tflops = throughput(task, call, workloads[wname])
                entry["throughput"].setdefault(label, {})[wname] = round(tflops, 1)
                print(f"    {label:40} {wname:28} {tflops:7.1f} TFLOP/s", flush=True)
            except Exception as exc:
                entry["throughput"].setdefault(label, {})[wname] = f"{type(exc).__name__}: {str(exc)[:200]}"
                print(f"    {label:40} {wname:28} {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            save()
    return True


def profile(name: str) -> None:
    task = get_task(CANDIDATES[name])
    mod = load(name)
    workload = {w.name: w for w in task.workloads()}[TIMED[task.name][0]]
    args = task.workload_inputs(
        workload, torch.Generator().manual_seed(3), torch.device("cuda"), torch.bfloat16
    )
    mod.kernel(*args)
    torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidate", action="append", choices=sorted(CANDIDATES))
    ap.add_argument("--sweep", action="store_true", help="also time the SWEEP_TILES alternatives")
    ap.add_argument(
        "--sweep-seconds", type=float, default=150.0, help="stop starting sweep entries after this"
    )
    ap.add_argument("--profile", choices=sorted(CANDIDATES), help="one call of the first workload (for ncu)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run of this script")
    ap.add_argument("--report", default="smoke.json", help="file name under $OUT")
    args = ap.parse_args()
    global DEVICE, DTYPE, REPORT_NAME
    REPORT_NAME = args.report
    if args.device == "cpu":
        from nodice.gate.runtime import prepare

        DEVICE, DTYPE = torch.device("cpu"), torch.float32
        prepare(DEVICE)
    else:
        REPORT["device"] = torch.cuda.get_device_name(0)
    if args.profile:
        profile(args.profile)
        return
    deadline = time.time() + args.sweep_seconds
    ok = [smoke(name, args.sweep, deadline) for name in args.candidate or CANDIDATES]
    print(
        "smoke:",
        ", ".join(
            f"{n}={'ok' if o else 'FAIL'}" for n, o in zip(args.candidate or CANDIDATES, ok, strict=True)
        ),
    )
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
