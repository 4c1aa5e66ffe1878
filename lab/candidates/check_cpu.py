"""CPU checks of the Triton candidates under Triton's interpreter: correctness and batch invariance.

    python3 lab/candidates/check_cpu.py [--quick]

In fp32 (the interpreter does not compute bf16), on the tasks' own inputs and references:

- attention_prefill_tma_ws: MHA, GQA and MQA, causal and not, sequence lengths that are and are
  not multiples of the tiles; both walks (staged, and the single warp-specialised loop) and both
  load paths (TMA descriptors, masked pointers), which must agree bit for bit; then one sequence
  alone against the same sequence in batches of 2..9 at the first, a middle and the last slot.
- gemm_persistent_tma: M from 1 to 129 against the reference, swap-AB and not; then one row
  alone against the same row in batches of 2..9, 16, 17, 64, 65 and 129 at three slots.

The interpreter's ``tl.dot`` is replaced by nodice's deterministic one (products summed in float64
and rounded once), as the gate does on CPU, so OpenBLAS's shape-dependent order cannot fake a
violation. What this does not show: the GPU's own bits (FMA contraction, MMA accumulation, warp
specialisation), which only the gate on the GPU can judge.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from nodice.gate.runtime import prepare
from nodice.tasks import get_task

HERE = Path(__file__).resolve().parent
CPU = torch.device("cpu")
RESULTS: list[tuple[str, bool, str]] = []


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def record(label: str, ok: bool, detail: str = "") -> None:
    RESULTS.append((label, ok, detail))
    print(f"{'ok  ' if ok else 'FAIL'} {label} {detail}", flush=True)


def close(task, got: torch.Tensor, want: torch.Tensor) -> tuple[bool, str]:
    tol = task.tolerance(torch.float32)
    err = (got.double() - want.double()).abs().max().item()
    return bool(torch.allclose(got, want, atol=tol.atol, rtol=tol.rtol)), f"max_abs_err={err:.2e}"


def first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a != b).nonzero()
    if len(diff) == 0:
        return ""
    idx = tuple(diff[0].tolist())
    return f"{int((a != b).sum())} elements differ, first at {idx}: {a[idx].item()!r} vs {b[idx].item()!r}"


# ---- attention ---------------------------------------------------------------------------------


def attention_checks(quick: bool) -> None:
    task = get_task("attention_prefill")
    mod = load("attention_prefill_tma_ws")
    gen = torch.Generator().manual_seed(1234)
    # Tiles for head dims 16 and 32 under the interpreter: the table's small-head entry (staged)
    # and the same tiles walked as one masked loop (the warp-specialised walk of the GPU table).
    staged = mod.tile_config(16, False, 4)
    single = (*staged[:4], True)
    cases = [
        ("gqa", True, 45, 16),
        ("gqa", False, 45, 32),
        ("mha", True, 32, 16),
        ("mha", False, 20, 16),
        ("mqa", False, 45, 16),
        ("mqa", True, 20, 32),
    ]
    for layout, causal, seq, head_dim in cases[: 3 if quick else None]:
        problem = task.problem(
            gen, CPU, torch.float32, layout=layout, causal=causal, seq_len=seq, head_dim=head_dim
        )
        args = task.compose(problem, task.samples(problem, gen, 2), gen)
        want = task.reference(*args)
        outs = {}
        for walk, tiles in (("staged", staged), ("single-loop", single)):
            for path, use_tma in (("tma", True), ("pointer", False)):
                outs[walk, path] = mod.forward(*args, use_tma=use_tma, tiles=tiles)
        name = f"attention {layout} {'causal' if causal else 'full'} S={seq} D={head_dim}"
        for (walk, path), got in outs.items():
            ok, detail = close(task, got, want)
            record(f"{name} {walk}/{path} vs reference", ok, detail)
        for walk in ("staged", "single-loop"):
            same = torch.equal(outs[walk, "tma"], outs[walk, "pointer"])
            record(
                f"{name} {walk}: tma path == pointer path (bitwise)",
                same,
                first_difference(outs[walk, "tma"], outs[walk, "pointer"]),
            )
    # Batch invariance: the target sequence alone, then among fresh batchmates.
    bi_cases = [
        ("gqa", True, 45, "staged", staged, True),
        ("mha", False, 20, "single-loop", single, True),
        ("gqa", False, 20, "staged", staged, False),
    ]
    for layout, causal, seq, walk, tiles, use_tma in bi_cases[: 1 if quick else None]:
        problem = task.problem(
            gen, CPU, torch.float32, layout=layout, causal=causal, seq_len=seq, head_dim=16
        )
        target = task.samples(problem, gen, 1)[0]

        def run(samples, problem=problem, use_tma=use_tma, tiles=tiles):
            return mod.forward(*task.compose(problem, samples, gen), use_tma=use_tma, tiles=tiles)

        alone = run([target])[0]
        path = "tma" if use_tma else "pointer"
        name = f"attention BI {layout} {'causal' if causal else 'full'} S={seq} {walk}/{path}"
        sizes = [2, 5, 9] if quick else list(range(2, 10))
        bad = []
        t0 = time.perf_counter()
        for batch in sizes:
            for slot in sorted({0, batch // 2, batch - 1}):
                mates = task.samples(problem, gen, batch - 1)
                out = run([*mates[:slot], target, *mates[slot:]])[slot]
                if not torch.equal(out, alone):
                    bad.append(f"B={batch} slot={slot}: {first_difference(out, alone)}")
        record(
            name + f" alone vs batches {sizes[0]}..{sizes[-1]} at 3 slots",
            not bad,
            "; ".join(bad[:2]) or f"({time.perf_counter() - t0:.0f}s)",
        )


# ---- gemm --------------------------------------------------------------------------------------


def gemm_checks(quick: bool) -> None:
    task = get_task("gemm")
    mod = load("gemm_persistent_tma")
    gen = torch.Generator().manual_seed(4321)
    problem = task.problem(gen, CPU, torch.float32)
    n, k = problem.dims["N"], problem.dims["K"]
    # The table's choice for the CPU layer, plus small tiles of both orientations, so that a
    # 129-row batch spans many tiles and the 4 persistent programs loop.
    configs = [
        ("table", mod.tile_config(n, k, 2)),
        ("swap-ab 16x32", (True, 16, 32, 2, 4)),
        ("plain 16x32", (False, 16, 32, 2, 4)),
    ]
    for label, tiles in configs:
        for m in (1, 5, 70) if quick else (1, 5, 70, 129):
            args = task.compose(problem, task.samples(problem, gen, m), gen)
            ok, detail = close(task, mod.matmul(*args, tiles=tiles), task.reference(*args))
            record(f"gemm {label} M={m} K={k} N={n} vs reference", ok, detail)
    for label, tiles in configs[: 2 if quick else None]:
        target = task.samples(problem, gen, 1)[0]
        alone = mod.matmul(*task.compose(problem, [target], gen), tiles=tiles)[0]
        sizes = [2, 3, 9, 17, 65] if quick else [*range(2, 10), 16, 17, 64, 65, 129]
        bad = []
        for m in sizes:
            for slot in sorted({0, m // 2, m - 1}):
                mates = task.samples(problem, gen, m - 1)
                out = mod.matmul(
                    *task.compose(problem, [*mates[:slot], target, *mates[slot:]], gen), tiles=tiles
                )[slot]
                if not torch.equal(out, alone):
                    bad.append(f"M={m} slot={slot}: {first_difference(out, alone)}")
        record(
            f"gemm BI {label}: row alone vs M={sizes[0]}..{sizes[-1]} at 3 slots", not bad, "; ".join(bad[:2])
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer cases (a couple of minutes less)")
    ap.add_argument("--only", choices=["attention", "gemm"])
    args = ap.parse_args()
    prepare(CPU)  # TRITON_INTERPRET=1 and the deterministic tl.dot, before the candidates are imported
    import triton

    print(f"triton {triton.__version__} interpreter, torch {torch.__version__}, fp32", flush=True)
    t0 = time.perf_counter()
    if args.only in (None, "attention"):
        attention_checks(args.quick)
    if args.only in (None, "gemm"):
        gemm_checks(args.quick)
    failed = sum(not ok for _, ok, _ in RESULTS)
    print(f"{len(RESULTS) - failed} passed, {failed} failed ({time.perf_counter() - t0:.0f}s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
