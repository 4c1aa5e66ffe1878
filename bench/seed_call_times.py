"""The slowest kernel call each task's seed makes in the gate and the benchmark: the call budgets' basis.

    PYTHONPATH=. python3 bench/seed_call_times.py [--device cpu|cuda] [--task T ...] [--repeat 3]

Evaluates every task's bundled seed (gate and benchmark) ``--repeat`` times in
one persistent worker and prints, per task, the median over the repetitions of
the ``slowest_call`` timing (the longest step the parent's clock saw between
two kernel calls, compilation aside; the median, because on a shared machine
one step in a run can take several times its usual time) as the
``SEED_SLOWEST_CALL_S`` entry of ``nodice/evaluation/budgets.py`` for that
device.
"""

from __future__ import annotations

import argparse
import json
import statistics

from nodice.evaluation import Evaluator
from nodice.tasks import available

EXAMPLES = "nodice/examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--task", action="append")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    slowest: dict[str, float] = {}
    with Evaluator(device=args.device, isolation="persistent") as ev:
        for task in args.task or available():
            runs = []
            for i in range(args.repeat):
                e = ev.evaluate(f"{EXAMPLES}/{task}/seed.py", task, seed=i)
                if e.verdict != "pass":
                    raise SystemExit(f"{task} seed: {e.verdict}: {e.check.reason}")
                runs.append(e.timings["slowest_call"] / 1e3)
            slowest[task] = statistics.median(runs)
            each = ", ".join(f"{r:.2f}" for r in runs)
            print(f"{task:<18} {slowest[task]:.3f} s  (runs: {each})", flush=True)
    print(json.dumps({args.device: {t: round(s, 2) for t, s in slowest.items()}}, indent=4))


if __name__ == "__main__":
    main()
