"""The vanilla baseline search (`nodice evolve --no-bi`) against the BI-aware one, through `nodice compare`.

One real run of each on rmsnorm on CPU with the built-in operator (3 evaluations: the seed, a sound
rewrite and the eager path for decode-sized batches, which the vanilla run commits and the BI run's
gate rejects), compared by the CLI; every figure is recomputed here from the run directories alone
(the SQLite journal and the git lineage), independently of nodice's readers.
"""

from __future__ import annotations

import fcntl
import json
import math
import re
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from nodice.evolution.agents.buckets import bucket_mutation, bucket_of
from nodice.evolution.agents.builtin import BuiltinAgent, Memory, tags_of
from nodice.evolution.agents.mutations import param_mutations
from nodice.evolution.journal import Attempt
from nodice.evolution.start import EvolveOptions, prepare_run
from nodice.gate.pipeline import check
from tests.conftest import EXAMPLES, run_cli
from tests.evolution_helpers import shared_folder

BUDGET = 3
SEED = (EXAMPLES / "rmsnorm" / "seed.py").read_text()


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The two runs and their comparison, made once per test session (under xdist too)."""
    shared = shared_folder(tmp_path_factory)
    folder = shared / "compare-runs"
    bi, vanilla, out, printed = folder / "bi", folder / "vanilla", folder / "compare.json", folder / "printed"
    with open(shared / "compare-runs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not printed.exists():
            shutil.rmtree(folder, ignore_errors=True)
            common = ["--device", "cpu", "--budget", str(BUDGET), "--rng-seed", "0", "--no-report"]
            # The two runs are independent: made side by side.
            with ThreadPoolExecutor(2) as pool:
                runs = pool.map(
                    lambda root, extra: run_cli("evolve", "rmsnorm", "--run-dir", str(root), *common, *extra),
                    (bi, vanilla),
                    ([], ["--no-bi"]),
                )
                for r in runs:
                    assert r.returncode == 0, r.stdout + r.stderr
            r = run_cli("compare", str(bi), str(vanilla), "--json", str(out), "--all-versions")
            assert r.returncode == 0, r.stdout + r.stderr
            printed.write_text(r.stdout)
    return {"bi": bi, "vanilla": vanilla, "json": json.loads(out.read_text()), "printed": printed.read_text()}


def _attempts(root: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(root / "results.sqlite")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM evolution_attempts ORDER BY id")]
    db.close()
    return rows


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def _lineage(root: Path) -> list[tuple[str, dict[str, float]]]:
    """(sha, scores per workload) of every committed version, oldest first, from the commit trailers."""
    out = []
    for sha in _git(root, "rev-list", "--reverse", "HEAD").split():
        body = _git(root, "log", "-1", "--format=%B", sha)
        scores = re.search(r"^Nodice-Scores: (.+)$", body, re.M)
        if scores:
            pairs = (item.split("=") for item in scores.group(1).split())
            out.append((sha, {w: float(v) for w, v in pairs}))
    return out


def test_the_vanilla_run_runs_no_bi_stage_and_commits_what_the_gate_rejects(compared: dict[str, Any]) -> None:
    assert json.loads((compared["vanilla"] / "run.json").read_text())["bi"] is False
    assert json.loads((compared["bi"] / "run.json").read_text())["bi"] is True
    vanilla, bi = _attempts(compared["vanilla"]), _attempts(compared["bi"])
    assert len(vanilla) == len(bi) == BUDGET
    for a in vanilla:
        assert not {"static", "dynamic"} & set(json.loads(a["stages"])), a["stages"]
        assert {"correctness", "bench"} <= set(json.loads(a["stages"]))
    for a in bi:
        stages = json.loads(a["stages"])
        assert "static" in stages and (a["verdict"] != "pass" or stages.get("dynamic") == "pass")
    eager = "rewrite:small_batch_eager_path"
    assert [a["outcome"] for a in vanilla if a["label"] == eager] == ["committed"]
    assert [a["outcome"] for a in bi if a["label"] == eager] == ["bi_violation"]


def test_compare_figures_are_the_stores_figures(compared: dict[str, Any]) -> None:
    c = compared["json"]
    assert c["task"] == "rmsnorm" and c["device"] == "cpu" and c["judged"] == "all_versions"
    assert c["runs"]["a"]["mode"] == "bi" and c["runs"]["b"]["mode"] == "vanilla"
    # Intervention rate: BI rejections over evaluations, straight from each journal.
    for key, root in (("a", compared["bi"]), ("b", compared["vanilla"])):
        rows = _attempts(root)
        rate = sum(r["verdict"] == "bi_violation" for r in rows) / len(rows)
        assert c["intervention_rate"][key] == pytest.approx(rate)
    assert c["intervention_rate"]["a"] > 0 and c["intervention_rate"]["b"] == 0
    # Speedup retention: the two best versions' scores, as the commits recorded them.
    (_, best_a), (_, best_b) = _lineage(compared["bi"])[-1], _lineage(compared["vanilla"])[-1]
    common = [w for w in best_a if w in best_b]
    assert sorted(c["workloads"]) == sorted(common) == ["cpu-small", "cpu-wide"]

    def geomean(s: dict[str, float]) -> float:
        return math.exp(sum(math.log(s[w]) for w in common) / len(common))

    # The trailers round to 6 significant digits; the store keeps the full values.
    assert c["speedup_retention"] == pytest.approx(geomean(best_a) / geomean(best_b), rel=1e-4)
    assert c["speedup_retention"] < 1  # the eager path is far faster under the interpreter
    # BI pass rate: every committed version judged again by the whole gate.
    for key, root in (("a", compared["bi"]), ("b", compared["vanilla"])):
        judged = c["runs"][key]["judged"]
        assert [j["sha"] for j in judged] == [sha for sha, _ in _lineage(root)]
        assert c["bi_pass_rate"][key] == pytest.approx(
            sum(j["verdict"] == "pass" for j in judged) / len(judged)
        )


def test_a_vanilla_commit_of_a_bi_violating_kernel_counts_as_failing(compared: dict[str, Any]) -> None:
    c, root = compared["json"], compared["vanilla"]
    judged = {j["sha"]: j for j in c["runs"]["b"]["judged"]}
    violating = []
    for sha, _ in _lineage(root):
        source = _git(root, "show", f"{sha}:workspace/kernel.py")
        if "eager path" in source:
            violating.append(sha)
            assert judged[sha]["verdict"] == "bi_violation" and not judged[sha]["passes"]
            # The eager path is a batch-dependent choice between algorithms: the full gate runs both
            # sides and rejects it on the bits that differ.
            assert judged[sha]["reason"].startswith("dynamic:")
        else:
            assert judged[sha]["verdict"] == "pass"
    assert violating and c["runs"]["b"]["best_verdict"] == "bi_violation"
    assert c["bi_pass_rate"]["b"] < 1 and c["bi_pass_rate"]["a"] == 1
    assert "speedup retention" in compared["printed"] and "bi_violation" in compared["printed"]


def test_compare_refuses_what_cannot_be_compared(compared: dict[str, Any], tmp_path: Path) -> None:
    r = run_cli("compare", str(compared["bi"]), str(tmp_path))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "is not a nodice run" in r.stderr
    other, _, _ = prepare_run(EvolveOptions(task="layernorm", run_dir=tmp_path / "ln", device="cpu"))
    r = run_cli("compare", str(compared["bi"]), str(other.root))
    assert r.returncode == 2 and "evolves 'rmsnorm'" in r.stderr and "'layernorm'" in r.stderr
    r = run_cli("evolve", "rmsnorm", "--run-dir", str(compared["vanilla"]), "--bi", "--no-report")
    assert r.returncode == 2 and "vanilla (--no-bi) run" in r.stderr, r.stderr
    damaged = shutil.copytree(compared["vanilla"], tmp_path / "damaged")
    for f in damaged.glob("results.sqlite*"):
        f.unlink()
    (damaged / "results.sqlite").write_text("not a database")
    r = run_cli("compare", str(compared["bi"]), str(damaged))
    assert r.returncode == 2 and "cannot read the journal" in r.stderr and "Traceback" not in r.stderr
    if not torch.cuda.is_available():  # runs made on a GPU are judged on one, or not at all
        copies = []
        for name in ("bi", "vanilla"):
            copy = shutil.copytree(compared[name], tmp_path / f"{name}-on-cuda")
            config = json.loads((copy / "run.json").read_text())
            (copy / "run.json").write_text(json.dumps(config | {"device": "cuda"}))
            copies.append(str(copy))
        r = run_cli("compare", *copies)
        assert r.returncode == 2 and "the runs ran on cuda" in r.stderr and "no CUDA device" in r.stderr


# ---- batch-bucketed proposals of the built-in operator ---------------------------------------
def _scores(values: dict[str, tuple[int, float]]) -> list[dict[str, Any]]:
    return [{"workload": w, "score": v, "params": {"B": b, "H": 4096}} for w, (b, v) in values.items()]


BEST = _scores({"decode": (128, 100.0), "prefill-4k": (4096, 100.0), "prefill-8k": (8192, 100.0)})
# Eight warps: faster on the prefill batches, slower on decode, slower overall.
WARPS_8 = _scores({"decode": (128, 60.0), "prefill-4k": (4096, 104.0), "prefill-8k": (8192, 103.0)})


def test_a_step_that_won_on_one_batch_range_is_proposed_for_that_range() -> None:
    bucket = bucket_of(WARPS_8, BEST)
    assert bucket is not None and bucket.large and bucket.threshold == 4096
    assert bucket.won == ("prefill-4k", "prefill-8k") and bucket.lost == ("decode",)
    mixed = _scores({"decode": (128, 60.0), "prefill-4k": (4096, 99.0), "prefill-8k": (8192, 103.0)})
    assert bucket_of(mixed, BEST) is not None  # decode and 4k lost, 8k won: the 8k bucket
    interleaved = _scores({"decode": (128, 101.0), "prefill-4k": (4096, 99.0), "prefill-8k": (8192, 103.0)})
    assert bucket_of(interleaved, BEST) is None  # no one boundary separates wins from losses

    agent = BuiltinAgent()
    memory: Memory = agent.memory
    attempt = Attempt(0, 0.0, "builtin", "param:num_warps=8", "", "x", {}, True, "pass", "", 80.0,
                      WARPS_8, {}, "", "slower", 100.0)  # fmt: skip
    memory.record("param:num_warps=8", attempt)
    proposals = {p.key: p for p in agent.proposals(SEED, "rmsnorm", BEST)}
    p = proposals["bucket:num_warps=8@>=4096"]
    assert "num_warps=(8 if batch >= 4096 else 4)" in p.source
    assert "batch_dependent" in p.tags and "batch_dependent" in tags_of(p.key)
    assert not any(k.startswith("bucket:") for k in (q.key for q in agent.proposals(SEED, "rmsnorm", None)))


def test_the_gate_rejects_bucketed_steps_and_the_operator_learns(tmp_path: Path) -> None:
    by_key = {m.key: m for m in param_mutations(SEED)}
    small = _scores({"decode": (128, 130.0), "prefill-4k": (4096, 90.0), "prefill-8k": (8192, 95.0)})
    for key, scores in (("param:num_warps=8", WARPS_8), ("param:cap(block_h)=2048", small)):
        bucket = bucket_of(scores, BEST)
        mutation = bucket_mutation(SEED, by_key[key], bucket) if bucket else None
        assert mutation is not None, key
        path = tmp_path / f"{mutation.key.replace(':', '_')}.py"
        path.write_text(mutation.source)
        result = check(path, "rmsnorm", device="cpu", correctness=False, dynamic=False)
        assert result.verdict == "bi_violation", (key, result.reason)
    memory = Memory()
    rejected = Attempt(0, 0.0, "builtin", "bucket:num_warps=8@>=4096", "", "y", {}, True, "bi_violation",
                       "static", 0.0, [], {}, "", "bi_violation", 100.0)  # fmt: skip
    memory.record(rejected.label, rejected)
    assert memory.banned[rejected.label] == "bi_violation" and memory.tag_penalty["batch_dependent"] == 1


def test_the_report_says_which_rule_committed(compared: dict[str, Any]) -> None:
    from nodice.report import write_report

    html = write_report(compared["vanilla"]).read_text()
    assert "nodice evolve rmsnorm --no-bi</h1>" in html and "the gate's BI stages were not run" in html
    bi_rows = _attempts(compared["bi"])
    rejected = sum(r["verdict"] == "bi_violation" for r in bi_rows)
    html = write_report(compared["bi"]).read_text()
    assert f"({rejected} of {len(bi_rows)}) were rejected for batch invariance" in html


def test_compare_collect_leaves_out_tasks_whose_runs_made_no_evaluation(tmp_path: Path) -> None:
    """bench/gpu/compare_collect.py: a task killed before its first evaluation is not a result."""
    recorded = Path(__file__).resolve().parents[1] / "bench" / "results" / "compare_h200" / "compare"
    (tmp_path / "compare").mkdir()
    for task in ("rmsnorm", "moe"):
        shutil.copy(recorded / f"{task}.json", tmp_path / "compare" / f"{task}.json")
    lines = [
        {"task": "rmsnorm", "status": "ok", "bi": {"evaluations": 6}, "vanilla": {"evaluations": 6}},
        {"task": "moe", "status": "incomplete: a run made no evaluation", "bi": {"evaluations": 0}},
        {"task": "gdn", "status": "skipped: 10 s left"},
    ]
    (tmp_path / "compare.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve().parents[1] / "bench" / "gpu" / "compare_collect.py"),
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    data = json.loads((tmp_path / "compare.json").read_text())
    summary = data["summary"]
    rmsnorm = json.loads((recorded / "rmsnorm.json").read_text())
    assert summary["tasks_compared"] == 1
    assert math.isclose(summary["speedup_retention_geomean"], rmsnorm["speedup_retention"])
    assert summary["bi"]["evaluations"] == rmsnorm["runs"]["a"]["evaluations"]
    assert "compare" in data["tasks"]["rmsnorm"] and "compare" not in data["tasks"]["moe"]
    assert set(data["tasks"]) == {"rmsnorm", "moe", "gdn"}
