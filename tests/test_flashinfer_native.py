"""FlashInfer-Bench CUDA solutions (torch binding): built behind a Python entry, analysed on any machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

pytest.importorskip("flashinfer_bench")

FIB = EXAMPLES / "flashinfer_bench"
DEFINITION = FIB / "rmsnorm_h4096.json"


def test_a_cuda_solution_that_splits_rows_by_the_batch_is_rejected_statically_on_cpu() -> None:
    proc = run_cli(
        "check",
        str(FIB / "rmsnorm_h4096_cuda_split.json"),
        "--definition",
        str(DEFINITION),
        "--device",
        "cpu",
        "--json",
    )
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "bi_violation"
    found = {
        (f["mechanism"], f["protected"], Path(f["file"].split(":")[-1]).name)
        for f in result["findings"]
        if f["severity"] == "violation"
    }
    assert ("atomics", "atomicAdd", "main.cu") in found
    assert ("work_partitioning", "NUM_SPLITS", "main.cu") in found
    steps = [step for f in result["findings"] for step in f["path"]]
    assert steps and all("nodice-solution-" not in step for step in steps)  # no temporary folder named
    assert any(step.startswith(f"{FIB / 'rmsnorm_h4096_cuda_split.json'}:main.cu line ") for step in steps)


def test_an_invariant_cuda_solution_on_cpu_says_what_needs_a_gpu() -> None:
    proc = run_cli(
        "check", str(FIB / "rmsnorm_h4096_cuda_row.json"), "--definition", str(DEFINITION), "--device", "cpu"
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "device unavailable: main.cu:6: native CUDA code runs on a CUDA device only (static analysis found "
        "no BI violation); correctness and dynamic validation need --device cuda"
    ]


def test_the_entry_builds_the_sources_under_a_name_that_carries_their_hash(tmp_path: Path) -> None:
    from nodice.errors import SolutionError
    from nodice.integrations.fib_native import ENTRY_MODULE, native_entry
    from nodice.integrations.flashinfer_bench import load_solution

    solution = load_solution(FIB / "rmsnorm_h4096_cuda_row.json")
    path, entry = native_entry(solution, tmp_path)
    assert path == tmp_path / ENTRY_MODULE and entry == "run"
    text = path.read_text()
    compile(text, str(path), "exec")
    assert "sources=[os.path.join(_HERE, s) for s in _SOURCES]" in text and "with_cuda=True" in text
    (tmp_path / "again").mkdir()
    same, _ = native_entry(solution, tmp_path / "again")
    assert same.read_text() == text  # the same sources: the same extension, built once, cached by torch
    other = solution.model_copy(deep=True)
    other.sources[0].content += "\n// changed\n"
    changed, _ = native_entry(other, tmp_path)
    assert changed.read_text() != text
    tvm = solution.model_copy(deep=True)
    tvm.spec.binding = type(solution.spec.binding)("tvm-ffi")
    with pytest.raises(
        SolutionError, match="binds its cuda code with tvm-ffi; nodice builds the torch binding"
    ):
        native_entry(tvm, tmp_path)
