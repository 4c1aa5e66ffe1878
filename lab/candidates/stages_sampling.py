"""Where a sampling request's time goes: a sampling kernel timed on requests of one kind each.

    python3 lab/candidates/stages_sampling.py [--file nodice/kernels/sampling.py] [--out OUT.jsonl]
        [--seconds 120]

No hardware counters are needed: the kernel's passes depend on the request's parameters, so timing
requests that take fewer passes and subtracting places the time. Kinds: ``greedy`` (the max pass
only), ``top_p`` (the draw and the top-p test), ``top_k`` (the radix select, the kept mass and the
draw), ``top_k_p`` (all of them) and ``mix`` (the benchmark's draw of parameters), each at 1, 64
and 256 requests of Llama-3's vocabulary (``--vocabs``), under the file's own pins and then each
chunk/warps setting given by ``--settings`` (``MAX_BLOCK_V:NUM_WARPS``; for kernels that have both
pins, such as ``sampling_per_request.py``; none by default). Timing is nodice's CUDA
timer (the benchmark's method). One JSON line per (setting, vocabulary, batch, kind), appended as it goes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import torch

from nodice.measuring.timing import measure
from nodice.tasks import get_task
from nodice.tasks.base import Problem

ROOT = Path(__file__).resolve().parents[2]
KINDS = {
    "greedy": (0.0, 0, 1.0),
    "top_p": (1.0, 0, 0.9),
    "top_k": (1.0, 50, 1.0),
    "top_k_p": (1.0, 50, 0.9),
}


def _inputs(task, vocab: int, batch: int, kind: str, device: torch.device) -> tuple:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(vocab + batch)
    problem = Problem(device, torch.float32, {"V": vocab})
    if kind == "mix":
        samples = [task.sample(problem, gen) for _ in range(batch)]
    else:
        samples = [
            task.request(problem, task.logits_row(problem, gen), *KINDS[kind], seed=1000 + i)
            for i in range(batch)
        ]
    return task.compose(problem, samples, gen)


def _setting(text: str) -> dict[str, int]:
    block, sep, warps = text.partition(":")
    if not (sep and block.isdigit() and warps.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not MAX_BLOCK_V:NUM_WARPS (e.g. 8192:16)")
    return {"MAX_BLOCK_V": int(block), "NUM_WARPS": int(warps)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=str(ROOT / "nodice" / "kernels" / "sampling.py"))
    ap.add_argument("--out", default="stages_sampling.jsonl")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run under the interpreter (small --vocabs)")
    ap.add_argument(
        "--settings",
        nargs="*",
        type=_setting,
        default=[],
    )
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 64, 256])
    ap.add_argument("--vocabs", nargs="*", type=int, default=[128256])
    args = ap.parse_args()
    device = torch.device(args.device)
    task = get_task("sampling")
    if not Path(args.file).is_file():
        ap.error(f"no such kernel file: {args.file}")
    spec = importlib.util.spec_from_file_location("sampling_stages", args.file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    deadline = time.monotonic() + args.seconds
    # A kernel without these pins (the split candidate) runs its own settings only.
    own = {name: getattr(mod, name) for name in ("MAX_BLOCK_V", "NUM_WARPS") if hasattr(mod, name)}
    if len(own) < 2 and args.settings:
        ap.error(f"{args.file} has no MAX_BLOCK_V/NUM_WARPS pins to set; pass --settings with no values")
    settings = [own, *args.settings]
    kinds = [*KINDS, "mix"]
    inputs = {
        (v, b, k): _inputs(task, v, b, k, device) for v in args.vocabs for b in args.batches for k in kinds
    }
    with open(args.out, "a") as out:
        for setting in settings:
            for name, value in setting.items():
                setattr(mod, name, value)
            for (v, b, k), xs in inputs.items():
                if time.monotonic() > deadline:
                    print("out of time", flush=True)
                    return 0
                row = {"setting": setting, "V": v, "B": b, "kind": k}
                try:
                    row["ms"] = measure(mod.kernel, xs, device).ms
                except Exception as exc:  # a setting that does not compile or run
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
