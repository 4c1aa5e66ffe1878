"""A FlashInfer-Bench definition whose inputs the device cannot hold is refused before anything is
allocated: one line naming the definition, its inputs and their sizes, exit code 2 (one JSON object
with ``--json``), before any stage runs. A definition of ordinary size is judged as before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from nodice.errors import DefinitionError
from nodice.tasks import get_task
from nodice.tasks.definition import definition_task_name
from nodice.tasks.reference_file import gb
from tests.conftest import EXAMPLES, run_cli

FIB = EXAMPLES / "flashinfer_bench"
HUGE = 10**12
NAME = f"rmsnorm_h{HUGE}"


def _huge(tmp_path: Path) -> tuple[Path, Path]:
    """``rmsnorm_h4096`` with a hidden size of 10**12 (4 TB a row in fp32), and its row solution for it."""
    definition = json.loads((FIB / "rmsnorm_h4096.json").read_text())
    definition["name"] = NAME
    definition["axes"]["hidden_size"]["value"] = HUGE
    definition["reference"] = definition["reference"].replace("== 4096", f"== {HUGE}")
    solution = json.loads((FIB / "rmsnorm_h4096_torch_row.json").read_text())
    solution["definition"] = NAME
    d, s = tmp_path / f"{NAME}.json", tmp_path / f"{NAME}_torch_row.json"
    d.write_text(json.dumps(definition))
    s.write_text(json.dumps(solution))
    return s, d


def _expected(device: str, where: str) -> re.Pattern[str]:
    """The refusal: the batch axis at the gate's largest batch on ``device``, sizes as the gate holds them."""
    task, dev = get_task(definition_task_name(FIB / "rmsnorm_h4096.json")), torch.device(device)
    batch = max([c.batch_size for c in task.contexts(dev)] + task.correctness_batches(dev))
    dtype = "float32" if device == "cpu" else "bfloat16"
    size = 4 if device == "cpu" else 2
    line = (
        f"bad definition: definition {NAME}: its inputs take at least {gb((batch + 1) * HUGE * size)} in "
        f"the largest batch the gate draws on {device} (hidden_states[batch_size={batch}, "
        f"hidden_size={HUGE}] {dtype} {gb(batch * HUGE * size)}; weight[hidden_size={HUGE}] {dtype} "
        f"{gb(HUGE * size)}) and the gate holds about 4 such batches, more than the "
    )
    return re.compile(re.escape(line) + r"\d+\.\d [GM]B " + re.escape(where))


def test_a_definition_too_large_for_the_device_is_refused_in_one_line(tmp_path: Path) -> None:
    solution, definition = _huge(tmp_path)
    r = run_cli("check", str(solution), "--definition", str(definition), "--device", "cpu")
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    assert _expected("cpu", "this process may use").fullmatch(r.stderr.removesuffix("\n")), r.stderr
    assert "out of memory" not in r.stderr


def test_json_prints_one_object_with_verdict_error_and_no_stage_run(tmp_path: Path) -> None:
    solution, definition = _huge(tmp_path)
    r = run_cli("check", str(solution), "--definition", str(definition), "--device", "cpu", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    payload = json.loads(r.stdout)
    assert payload["verdict"] == "error" and payload["exit_code"] == 2
    assert payload["stages"] == {} and payload["findings"] == []
    assert _expected("cpu", "this process may use").fullmatch(payload["error"]), payload["error"]
    assert r.stderr == f"{payload['error']}\n"


def test_every_draw_checks_before_it_allocates(tmp_path: Path) -> None:
    """In this process too: the problem and a benchmark workload are refused, not allocated (4 TB)."""
    _, definition = _huge(tmp_path)
    task = get_task(definition_task_name(definition))
    cpu, gen = torch.device("cpu"), torch.Generator().manual_seed(0)
    with pytest.raises(DefinitionError) as exc:
        task.problem(gen, cpu, torch.float32)
    assert _expected("cpu", "this process may use").fullmatch(exc.value.line())
    workload = task.small_workloads()[0]
    with pytest.raises(DefinitionError, match=rf"in workload {workload.name} on cpu \(hidden_states\["):
        task.workload_inputs(workload, gen, cpu, torch.float32)


def test_static_analysis_alone_allocates_nothing_and_still_runs(tmp_path: Path) -> None:
    solution, definition = _huge(tmp_path)
    r = run_cli("check", str(solution), "--definition", str(definition), "--device", "cpu", "--static-only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("PASS") and "bad definition" not in r.stdout + r.stderr


def test_a_definition_of_ordinary_size_still_passes() -> None:
    r = run_cli(
        "check",
        str(FIB / "rmsnorm_h4096_torch_row.json"),
        "--definition",
        str(FIB / "rmsnorm_h4096.json"),
        "--device",
        "cpu",
        "--seed",
        "3",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    payload = json.loads(r.stdout)
    assert payload["verdict"] == "pass" and payload["error"] is None


@pytest.mark.gpu
def test_on_cuda_the_devices_free_memory_is_the_limit(tmp_path: Path) -> None:
    solution, definition = _huge(tmp_path)
    r = run_cli("check", str(solution), "--definition", str(definition), "--device", "cuda")
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    where = f"free on {torch.cuda.get_device_name()}"
    assert _expected("cuda", where).fullmatch(r.stderr.removesuffix("\n")), r.stderr
