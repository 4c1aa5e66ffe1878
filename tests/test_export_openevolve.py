"""`nodice export openevolve`: the files, nodice as OpenEvolve's evaluator, and a real OpenEvolve run.

The end-to-end test runs `openevolve-run` (OpenEvolve's own controller, process
pool and prompt sampler) against a scripted OpenAI-compatible server on loopback.
The script answers every prompt built on a batch-invariant parent with an edit
that makes the reduction tile depend on the batch, and every prompt built on that
rejected program with a repair; the test reads what the server received.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from openevolve.config import Config
from openevolve.evaluator import Evaluator as OpenEvolveInternalEvaluator
from openevolve.utils.code_utils import parse_evolve_blocks

from nodice.integrations.openevolve import OpenEvolveEvaluator, close_evaluators
from nodice.integrations.openevolve_export import (
    END,
    START,
    ExportError,
    OpenEvolveExport,
    export_openevolve,
    mark_evolve_block,
)
from tests.conftest import EXAMPLES, run_cli
from tests.test_evolution_openai import API_KEY, ScriptedChatServer

SEED = EXAMPLES / "rmsnorm" / "seed.py"
TILE_LINE = "    block_h = min(triton.next_power_of_2(hidden), 1024)"
# The BI-violating edit: a smaller reduction tile for small batches (caught by static analysis).
VIOLATING_LINE = "    block_h = 256 if batch < 16 else min(triton.next_power_of_2(hidden), 1024)"
# The repair: a different tile, still a function of the hidden size alone.
REPAIRED_LINE = "    block_h = min(triton.next_power_of_2(hidden), 512)"


def _diff(search: str, replace: str, why: str) -> str:
    return f"{why}\n\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


# ---- the exported files -------------------------------------------------------------------------


def test_export_writes_files_openevolve_loads(tmp_path: Path) -> None:
    out = tmp_path / "oe"
    r = run_cli(
        "export", "openevolve", "rmsnorm", "--out", str(out), "--device", "cpu",
        "--api-base", "http://127.0.0.1:9/v1", "--model", "my-model", "--iterations", "7", "--workers", "2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [Path(line).name for line in r.stdout.splitlines()[:3]] == [
        "initial_program.py",
        "evaluator.py",
        "config.yaml",
    ]

    program = (out / "initial_program.py").read_text()
    compile(program, "initial_program.py", "exec")
    blocks = parse_evolve_blocks(program)
    assert len(blocks) == 1
    seed = SEED.read_text()
    # The whole seed is there; the imports stay outside the block, the kernels are inside it.
    assert program.replace(START + "\n", "").replace(END + "\n", "").endswith(seed)
    assert "import triton" not in blocks[0][2] and "@triton.jit" in blocks[0][2]
    assert "def kernel(" in blocks[0][2]

    config = Config.from_yaml(out / "config.yaml")
    assert config.llm.api_base == "http://127.0.0.1:9/v1"
    assert [m.name for m in config.llm.models] == ["my-model"]
    assert config.llm.api_key is None  # the key comes from the environment, never from the file
    assert config.max_iterations == 7
    assert config.evaluator.parallel_evaluations == 2
    assert config.evaluator.cascade_evaluation and config.evaluator.cascade_thresholds == [0.5]
    assert config.prompt.include_artifacts and config.enforce_evolve_blocks
    assert "`rmsnorm`" in config.prompt.system_message and "GB/s" in config.prompt.system_message
    assert "Triton's interpreter" in config.prompt.system_message  # --device cpu

    # OpenEvolve's own loader accepts the evaluator and finds the cascade.
    loaded = OpenEvolveInternalEvaluator(config.evaluator, str(out / "evaluator.py"))
    module = sys.modules["evaluation_module"]
    assert all(hasattr(module, f) for f in ("evaluate", "evaluate_stage1", "evaluate_stage2"))
    assert module.NODICE.task == "rmsnorm" and module.NODICE.settings.device == "cpu"
    assert loaded.evaluate_function is module.evaluate


def test_export_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    r = run_cli("export", "openevolve", "no_such_task", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert r.stderr.strip().startswith("unknown task") and "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()

    out = tmp_path / "oe"
    export_openevolve(OpenEvolveExport("rmsnorm", out))
    (out / "config.yaml").write_text("mine\n")
    with pytest.raises(ExportError, match=r"initial_program\.py exists; pass --force to overwrite"):
        export_openevolve(OpenEvolveExport("rmsnorm", out))
    assert (out / "config.yaml").read_text() == "mine\n"  # nothing overwritten
    export_openevolve(OpenEvolveExport("rmsnorm", out, force=True))
    assert "cascade_evaluation: true" in (out / "config.yaml").read_text()

    bad_seed = tmp_path / "bad.py"
    bad_seed.write_text("def kernel(x, weight, eps)\n    return x\n")
    for opts, message in [
        (OpenEvolveExport("rmsnorm", tmp_path / "a", device="tpu"), "--device must be cpu or cuda"),
        (OpenEvolveExport("rmsnorm", tmp_path / "a", api_base="localhost:8000"), "http(s) URL"),
        (OpenEvolveExport("rmsnorm", tmp_path / "a", iterations=0), "at least 1"),
        (OpenEvolveExport("rmsnorm", tmp_path / "a", seed=bad_seed), "does not parse: line 1"),
        (OpenEvolveExport("rmsnorm", tmp_path / "a", seed=tmp_path / "none.py"), "no seed kernel"),
        (OpenEvolveExport("rmsnorm", tmp_path / "a", entry="rms_norm"), "defines no 'rms_norm'"),
    ]:
        with pytest.raises(ExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
            export_openevolve(opts)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or None"):
        OpenEvolveEvaluator("rmsnorm", device="tpu")


def test_evolve_block_marking() -> None:
    source = '"""Doc."""\n\nimport torch\nfrom a import b\n\n# about f\n@deco\ndef f():\n    pass\n\n\n'
    marked = mark_evolve_block(source)
    assert marked == (
        '"""Doc."""\n\nimport torch\nfrom a import b\n\n'
        f"{START}\n# about f\n@deco\ndef f():\n    pass\n{END}\n"
    )
    assert mark_evolve_block(marked) == marked  # a seed with its own blocks is kept
    with pytest.raises(ExportError, match="1 # EVOLVE-BLOCK-START and 0"):
        mark_evolve_block(f"{START}\nx = 1\n")
    with pytest.raises(ExportError, match="no code after its imports"):
        mark_evolve_block("import torch\n")


# ---- the evaluation functions ------------------------------------------------------------------


TORCH_RMSNORM = """
import torch


def kernel(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
"""
# Correct (RMSNorm ignores the scale), but every other call rounds with another scale: a call
# counter the batch does not decide, so static analysis has nothing to follow; only running the
# same sample twice shows it.
BATCH_SCALED = TORCH_RMSNORM.replace("import torch\n", "import torch\n\n_CALLS = [0]\n").replace(
    "    xf = x.float()\n",
    "    _CALLS[0] += 1\n    xf = x.float() * (1.0 + 3e-7 * (_CALLS[0] % 2))\n",
)


def test_stages_metrics_and_artifacts(tmp_path: Path) -> None:
    nodice = OpenEvolveEvaluator("rmsnorm", device="cpu")
    program = tmp_path / "program_under_test.py"
    try:
        # A batch-invariant kernel passes stage 1 ...
        program.write_text(TORCH_RMSNORM)
        first = nodice.evaluate_stage1(str(program))
        assert first.metrics["combined_score"] == 1.0 and first.metrics["gate_pass"] == 1.0
        assert first.metrics["verdict_pass"] == 1.0 and first.metrics["throughput"] == 0.0
        assert "stage dynamic: pass" in first.artifacts["nodice_gate"]
        # ... and when its bytes change before stage 2, stage 2 runs the whole gate again.
        program.write_text(SEED.read_text().replace(TILE_LINE, VIOLATING_LINE))
        second = nodice.evaluate_stage2(str(program))
        assert second.metrics["combined_score"] == 0.0 and second.metrics["verdict_bi_violation"] == 1.0
        assert second.metrics["verdict_pass"] == 0.0 and second.metrics["throughput"] == 0.0
        report = second.artifacts["nodice_gate"]  # the gate's report, for the bytes it judged
        assert "stage static: reject" in report and "reduction_order -> BLOCK_H" in report
        # The file is named as the LLM knows it, not by its temporary path.
        assert re.search(r"finding \[violation\] program\.py:\d+ ", report) and str(tmp_path) not in report

        # A violation only dynamic validation sees: the first mismatch reaches the artifacts.
        program.write_text(BATCH_SCALED)
        caught = nodice.evaluate_stage1(str(program))
        assert caught.metrics["combined_score"] == 0.0 and caught.metrics["verdict_bi_violation"] == 1.0
        gate = caught.artifacts["nodice_gate"]
        assert "stage static: pass" in gate and "stage dynamic: reject" in gate
        assert "first mismatch: " in gate and "elements differ" in gate and "context: " in gate
        assert caught.artifacts["nodice_verdict"].startswith("bi_violation — dynamic: ")

        # A program that cannot be judged scores 0 and says why, in one evaluation (no cascade).
        program.write_text("def kernel(x, weight, eps)\n    return x\n")
        broken = nodice.evaluate(str(program))
        assert broken.metrics["combined_score"] == 0.0 and broken.metrics["verdict_error"] == 1.0
        assert "syntax error" in broken.artifacts["nodice_verdict"]
    finally:
        close_evaluators()


def test_forked_child_starts_without_its_parents_workers() -> None:
    """OpenEvolve forks its iteration workers: a child must never talk to the parent's sandbox pipes."""
    from nodice.integrations import openevolve as adapter

    try:
        parent = adapter._SANDBOXES.evaluator(adapter.EvaluatorSettings(device="cpu"))  # no process yet
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child reports what it inherited, then leaves without running any cleanup
            os.write(write, str(len(adapter._SANDBOXES.evaluators)).encode())
            os._exit(0)
        os.close(write)
        assert os.read(read, 16) == b"0"
        os.waitpid(pid, 0)
        assert adapter._SANDBOXES.evaluators == {adapter.EvaluatorSettings(device="cpu"): parent}
    finally:
        close_evaluators()


# ---- a real OpenEvolve run ------------------------------------------------------------------------


def _current_program(prompt: str) -> str:
    """The parent program of a prompt (OpenEvolve's diff template: "# Current Program" then a code block)."""
    tail = prompt.split("# Current Program\n```python\n", 1)[1]
    return tail.split("\n```", 1)[0]


def _reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    parent = _current_program(messages[-1]["content"])
    if VIOLATING_LINE in parent:
        content = _diff(VIOLATING_LINE, REPAIRED_LINE, "Make the tile a function of the hidden size only.")
    else:
        content = _diff(TILE_LINE, VIOLATING_LINE, "Use a smaller tile for small batches to cut latency.")
    return {"role": "assistant", "content": content}


def _programs(output: Path) -> list[dict[str, Any]]:
    checkpoints = sorted(
        (output / "checkpoints").iterdir(), key=lambda p: int(p.name.removeprefix("checkpoint_"))
    )
    return [json.loads(p.read_text()) for p in (checkpoints[-1] / "programs").glob("*.json")]


def test_openevolve_run_scores_a_violation_zero_and_shows_its_diagnostic(tmp_path: Path) -> None:
    iterations = 4
    out = tmp_path / "oe"
    with ScriptedChatServer([_reply] * (iterations + 2)) as server:
        export = OpenEvolveExport("rmsnorm", out, "cpu", server.url, "scripted-model", iterations)
        export_openevolve(export)
        # Two islands, one worker: iterations 1 and 2 both start from the seed (one per island) and
        # make the violating edit; island 1 then holds only that rejected program, so iteration 4's
        # parent is it, whatever OpenEvolve's random draws. Checkpoints after every iteration.
        config = yaml.safe_load((out / "config.yaml").read_text())
        config["database"] = {"num_islands": 2}
        config["checkpoint_interval"] = 1
        (out / "config.yaml").write_text(yaml.safe_dump(config))
        command = [str(Path(sys.executable).parent / "openevolve-run"), str(out / "initial_program.py")]
        command += [str(out / "evaluator.py"), "--config", str(out / "config.yaml")]
        run = subprocess.run(
            [*command, "--iterations", str(iterations)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OPENAI_API_KEY": API_KEY},
            cwd=tmp_path,
        )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert not server.errors
    prompts = [body["messages"][-1]["content"] for body in server.requests]
    assert len(prompts) == iterations
    assert {body["model"] for body in server.requests} == {"scripted-model"}
    assert "batch invariance" in server.requests[0]["messages"][0]["content"].lower()

    # The seed's own evaluation reaches the first prompts: verdict and benchmark.
    assert VIOLATING_LINE not in _current_program(prompts[0])
    assert "### nodice_verdict\n```\npass — geomean " in prompts[0]
    assert "torch F.rms_norm" in prompts[0]
    # OpenEvolve's merge of the two stages kept both reports.
    assert "### nodice_gate\n```\ngate verdict: pass" in prompts[0] and "### nodice_benchmark\n" in prompts[0]

    # The prompt built on the rejected program: fitness 0 and nodice's diagnostic.
    rejected = prompts[3]
    assert VIOLATING_LINE in _current_program(rejected)
    assert "Fitness: 0.0000" in rejected
    assert "## Last Execution Output" in rejected
    assert "bi_violation — static: BLOCK_H tiles a reduction in _rmsnorm_row and depends on" in rejected
    assert "reduction_order -> BLOCK_H" in rejected  # the mechanism and the protected parameter
    assert "via line" in rejected and "(batch source: x.shape[0])" in rejected  # the dependency path
    assert "repair: derive the tile from the hidden size only" in rejected

    # What OpenEvolve recorded: the violations scored 0, the repair and the seed scored their throughput.
    programs = _programs(out / "openevolve_output")
    violating = [p for p in programs if VIOLATING_LINE in p["code"]]
    repaired = [p for p in programs if REPAIRED_LINE in p["code"]]
    assert len(violating) >= 2 and repaired
    for p in violating:
        assert p["metrics"]["combined_score"] == 0.0
        assert p["metrics"]["verdict_bi_violation"] == 1.0 and p["metrics"]["gate_pass"] == 0.0
    for p in repaired:
        assert p["metrics"]["verdict_pass"] == 1.0
        assert p["metrics"]["combined_score"] == p["metrics"]["throughput"] > 0
