"""The gate on a held-out pool of real KernelBench problems: one `nodice check` per candidate.

    python bench/heldout3_gate.py --checkout DIR --mode full --jobs 2 --json OUT.json
    python bench/heldout3_gate.py --pool bench/detector-heldout4 --checkout DIR …   # another such pool

``--checkout`` is the nodice source tree to measure (a worktree of an older commit for the
"before" table). Each problem is run with its batch shrunk to the pool's ``cpu_batch_size``: a
copy of the problem with its ``batch_size`` global set (the same for every checkout, whether or not
it has ``--batch-size``). Candidates labelled ``excluded`` or ``cuda_only`` on CPU are skipped.
The pool is held out: this script runs it and counts, it never reads a candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

POOL = Path(__file__).resolve().parent / "detector-heldout3"
MODES = {"full": [], "static": ["--static-only"], "dynamic": ["--dynamic-only"]}


def shrunk_problem(problem: Path, batch: int, folder: Path) -> Path:
    text = problem.read_text(encoding="utf-8")
    new, n = re.subn(r"(?m)^batch_size\s*=\s*\d+", f"batch_size = {batch}", text)
    if n != 1:
        raise SystemExit(f"{problem.name}: expected one batch_size global, found {n}")
    out = folder / problem.name
    out.write_text(new, encoding="utf-8")
    return out


def run_one(
    record: dict, checkout: Path, mode: str, folder: Path, timeout: float, seed: int, pool: Path = POOL
) -> dict:
    cand = pool / "pool" / f"{record['key']}.py"
    problem = shrunk_problem(pool / record["problem"], record["cpu_batch_size"], folder)
    cmd = [sys.executable, "-m", "nodice", "check", str(cand), "--reference", str(problem)]
    cmd += ["--device", "cpu", "--json", "--seed", str(seed), *MODES[mode]]
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=checkout)
        out, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired:
        out, code = "", -1
    seconds = round(time.perf_counter() - t0, 1)
    try:
        payload = json.loads(out)
        verdict, reason = payload["verdict"], (payload.get("reason") or payload.get("error") or "")
    except (ValueError, KeyError):
        verdict, reason = "no_json", f"exit {code}"
    return {
        "key": record["key"],
        "label": record["label_cpu"],
        "language": record.get("language", ""),
        "verdict": verdict,
        "exit": code,
        "reason": reason[:300],
        "seconds": seconds,
    }


def tally(rows: list[dict]) -> dict:
    def count(label: str, pred) -> tuple[int, int]:
        group = [r for r in rows if r["label"] == label]
        return sum(1 for r in group if pred(r["verdict"])), len(group)

    rejected = lambda v: v in ("bi_violation", "incorrect", "cheat")
    return {
        "detected": count("violating", lambda v: v == "bi_violation"),
        "violating_rejected_any": count("violating", rejected),
        "falsely_rejected": count("invariant", lambda v: v != "pass"),
        "invariant_bi_violation": count("invariant", lambda v: v == "bi_violation"),
        "coupling_not_applicable": count("not_applicable", lambda v: v == "not_applicable"),
        "coupling_blamed": count("not_applicable", lambda v: v == "bi_violation"),
        "coupling_passed": count("not_applicable", lambda v: v == "pass"),
        "errors": sum(1 for r in rows if r["verdict"] in ("error", "no_json")),
        "tracebacks": sum(1 for r in rows if "Traceback" in r["reason"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=Path, default=POOL, help="folder with labels.json, problems/, pool/")
    ap.add_argument("--checkout", type=Path, required=True)
    ap.add_argument("--mode", choices=sorted(MODES), default="full")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    pool_dir = args.pool.resolve()
    skipped = ("excluded", "cuda_only")
    records = [r for r in json.loads((pool_dir / "labels.json").read_text()) if r["label_cpu"] not in skipped]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="heldout3-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        folders = []
        for i in range(len(records)):
            f = Path(tmp) / str(i)
            f.mkdir()
            folders.append(f)
        rows = list(
            pool.map(
                lambda rf: run_one(
                    rf[0], args.checkout.resolve(), args.mode, rf[1], args.timeout, args.seed, pool_dir
                ),
                zip(records, folders, strict=True),
            )
        )
    commit = subprocess.run(
        ["git", "-C", str(args.checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "commit": commit,
        "pool": pool_dir.name,
        "mode": args.mode,
        "seconds": round(time.perf_counter() - t0, 1),
        "tally": tally(rows),
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("commit", "mode", "seconds", "tally")}, indent=1))


if __name__ == "__main__":
    main()
