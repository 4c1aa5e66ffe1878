"""CPU checks of sampling_split under Triton's interpreter (fp32), against the seed kernel.

    .venv/bin/python lab/candidates/check_sampling_cpu.py [--quick]

(a) Same tokens as nodice/examples/sampling/seed.py for many random requests (mixed temperature,
    top_k incl. 1 and > V, top_p incl. tiny and 1, greedy, rows with heavy ties, vocabularies with
    a partial last chunk). Both use the same uniform and the same rules; only fp32 summation order
    differs, so a mismatch could only come from a boundary within rounding -- any is reported and
    then checked against the task's allowed set.
(b) A request alone vs. the same request in batches of 2..9, 17, 33 at the first, a middle and the
    last slot, with random batchmates: bitwise the same token.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from nodice.gate.runtime import prepare

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CPU = torch.device("cpu")
FAILS: list[str] = []


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def report(label: str, ok: bool, detail: str = "") -> None:
    if not ok:
        FAILS.append(label)
    print(f"{'ok  ' if ok else 'FAIL'} {label} {detail}", flush=True)


def random_requests(task, vocab: int, n: int, gen: torch.Generator):
    from nodice.tasks.base import Problem

    prob = Problem(CPU, torch.float32, {"V": vocab})
    samples = []
    for i in range(n):
        row = task.logits_row(prob, gen)
        style = i % 6
        if style == 1:  # heavy ties: a few distinct values
            row = torch.round(row * 0.5) * 2.0
        elif style == 2:  # ties at the very top
            row[torch.randperm(vocab, generator=gen)[:7]] = row.max() + 1.0
        t = [0.0, 0.3, 0.7, 1.0, 1.5, 2.5][int(torch.randint(6, (1,), generator=gen))]
        k = [0, 0, 1, 2, 5, 20, vocab, vocab + 3, vocab // 2][int(torch.randint(9, (1,), generator=gen))]
        p = [1.0, 1.0, 0.95, 0.9, 0.5, 0.1, 1e-3, 0.999][int(torch.randint(8, (1,), generator=gen))]
        seed = int(torch.randint(2**62, (1,), generator=gen))
        samples.append(task.request(prob, row, t, k, p, seed))
    return prob, samples


def check_against_seed(task, cand, seedk, vocab: int, n: int, batch: int, gen: torch.Generator) -> None:
    from nodice.tasks.sampling import rule_violation

    prob, samples = random_requests(task, vocab, n, gen)
    same = total = 0
    for s in range(0, n, batch):
        args = task.compose(prob, samples[s : s + batch], gen)
        a, b = cand.kernel(*args), seedk.kernel(*args)
        same += int((a == b).sum())
        total += a.numel()
        for i in (a != b).nonzero().flatten().tolist():
            print(
                f"     mismatch V={vocab} req {s + i}: cand {int(a[i])} seed {int(b[i])} "
                f"(T={float(args[1][i]):.3g} k={int(args[2][i])} p={float(args[3][i]):.3g})"
            )
        bad = rule_violation(args[0], args[1], args[2], args[3], a)
        report(f"(a) V={vocab} requests {s}..{s + a.numel() - 1} allowed set", not bad, bad)
    report(f"(a) V={vocab} tokens equal to the seed's", same == total, f"{same}/{total}")


def check_invariance(task, cand, vocab: int, sizes: list[int], gen: torch.Generator) -> None:
    from nodice.tasks.base import Problem

    prob = Problem(CPU, torch.float32, {"V": vocab})
    targets = [task.sample(prob, gen, mates=m) for m in ("wide", "mix", "narrow")]
    alone = [cand.kernel(*task.compose(prob, [t], gen)) for t in targets]
    n = 0
    for b in sizes:
        for _j, pos in enumerate(sorted({0, b // 2, b - 1})):
            ti = (n := n + 1) % len(targets)
            mates = [
                task.sample(prob, gen, mates=("mix", "greedy", "wide", "narrow")[m % 4]) for m in range(b)
            ]
            mates[pos] = targets[ti]
            out = cand.kernel(*task.compose(prob, mates, gen))
            ok = bool(out[pos] == alone[ti][0])
            report(f"(b) V={vocab} B={b} slot {pos}", ok, f"token {int(out[pos])} alone {int(alone[ti][0])}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    prepare(CPU)
    import triton

    from nodice.tasks import get_task

    cand = load("sampling_split", HERE / "sampling_split.py")
    seedk = load("sampling_seed", ROOT / "nodice" / "examples" / "sampling" / "seed.py")
    task = get_task("sampling")
    print(
        f"triton {triton.__version__} interpreter; chunking V=256 {cand._chunking(256)}, "
        f"V=1000 {cand._chunking(1000)}, V=128256 {cand._chunking(128256)}",
        flush=True,
    )
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(1234)
    check_against_seed(task, cand, seedk, 256, 60 if args.quick else 240, 60, gen)
    check_against_seed(task, cand, seedk, 1000, 24 if args.quick else 72, 24, gen)
    sizes = [2, 3, 9, 33] if args.quick else [2, 3, 4, 5, 6, 7, 8, 9, 17, 33]
    check_invariance(task, cand, 256, sizes, gen)
    check_invariance(task, cand, 1000, [2, 17], gen)
    print(f"{'all passed' if not FAILS else f'{len(FAILS)} failed'} ({time.perf_counter() - t0:.0f}s)")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
