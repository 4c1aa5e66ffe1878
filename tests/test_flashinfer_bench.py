"""FlashInfer-Bench: its Definition/Solution files through the gate, nodice's results as its Traces.

Everything is read and loaded with the real ``flashinfer-bench`` package: the example files with its
models, the traces nodice writes with its ``TraceSet`` loader.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from flashinfer_bench.data import Definition, Performance, Solution, Trace, TraceSet

from nodice.errors import DefinitionError, EntryPointError
from nodice.integrations.flashinfer_bench import prepare
from nodice.loader import load_kernel
from nodice.tasks import get_task
from nodice.tasks.definition import ADAPTERS, adapter_for, definition_task_name
from tests.conftest import EXAMPLES, run_cli
from tests.fp32_bounds import assert_within, matmul_bound, paged_decode_bound

FIB = EXAMPLES / "flashinfer_bench"
RMSNORM_DEF = FIB / "rmsnorm_h4096.json"
RMSNORM_ROW = FIB / "rmsnorm_h4096_triton_row.json"
RMSNORM_SPLIT = FIB / "rmsnorm_h4096_triton_split.json"
GEMM_DEF = FIB / "gemm_n4096_k4096.json"
FUSED_DEF = FIB / "fused_add_rmsnorm_h4096.json"
DECODE_DEF = FIB / "gqa_paged_decode_h32_kv8_d128_ps1.json"


def _dataset(root: Path, traces: Path, *solutions: Path) -> TraceSet:
    """A FlashInfer-Bench dataset folder holding the rmsnorm definition, ``solutions`` and ``traces``."""
    for sub, files in (("definitions", [RMSNORM_DEF]), ("solutions", list(solutions))):
        (root / sub / "rmsnorm").mkdir(parents=True)
        for f in files:
            shutil.copy(f, root / sub / "rmsnorm" / f.name)
    (root / "traces" / "rmsnorm").mkdir(parents=True)
    shutil.copy(traces, root / "traces" / "rmsnorm" / "rmsnorm_h4096.jsonl")
    return TraceSet.from_path(str(root))


def _assert_same_function(
    got: torch.Tensor, expected: torch.Tensor, catalog: str, args: tuple, rounded: bool = False
) -> None:
    """Two references of one definition: a GEMM or an attention may sum in another order in each
    (equal up to reassociation, tests/fp32_bounds.py); the norms within 1e-5. ``rounded``: ``got`` is
    FlashInfer-Bench's reference rounded to bf16 (unit roundoff 2⁻⁸), as its attention references are."""
    if catalog == "gemm":
        assert_within(got, expected, matmul_bound(args[0], args[1]), catalog)
    elif catalog == "attention_decode":
        bound = paged_decode_bound(*args)
        if rounded:
            bound = bound + 2.0**-8 * (expected.double().abs() + bound)
        assert_within(got.to(expected.dtype), expected, bound, catalog)
    else:
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_examples_are_flashinfer_bench_files_nodice_maps() -> None:
    files = [json.loads(p.read_text()) for p in sorted(FIB.glob("*.json"))]
    definitions = {}
    for d in (Definition.model_validate(f) for f in files if "spec" not in f):  # a Solution has a spec
        definitions[d.name] = d
        assert adapter_for(d) in ADAPTERS[d.op_type]
    solutions = [Solution.model_validate(f) for f in files if "spec" in f]
    assert len(definitions) == 25
    # Python (torch) and Triton solutions, each for a definition of the folder.
    runnable = [s for s in solutions if s.spec.language.value in ("triton", "python")]
    assert len([s for s in runnable if s.spec.language.value == "triton"]) == 5 and len(runnable) == 27
    for s in solutions:
        assert s.definition in definitions and s.get_entry_source() is not None
    for s in runnable:
        assert s.get_entry_symbol() == "run"


@pytest.mark.parametrize(
    "definition",
    [RMSNORM_DEF, FUSED_DEF, GEMM_DEF, DECODE_DEF],
    ids=["rmsnorm", "fused_add_rmsnorm", "gemm", "gqa_paged_decode"],
)
def test_adapter_feeds_the_definition_what_the_catalog_task_computes(definition: Path) -> None:
    """The definition's own reference on the adapted arguments equals the catalog task's reference."""
    task = get_task(definition_task_name(definition))
    d = task.definition  # type: ignore[attr-defined]
    adapter = adapter_for(d)
    catalog = get_task(adapter.task)
    device, dtype = torch.device("cpu"), torch.float32
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, device, dtype)
    args = task.compose(problem, task.samples(problem, gen, 3), gen)
    # The const axes are the definition's, whatever size the catalog task uses on CPU.
    assert {k: problem.dims[k] for k in task.pinned} == {  # type: ignore[attr-defined]
        dim: d.const_axes[axis] for dim, axis in adapter.const_dims.items()
    }
    ours, theirs = task.reference(*args), catalog.reference(*args)
    judged_lse = adapter.judges_lse
    ours = ours[0] if judged_lse else ours
    rounded = isinstance(ours, torch.Tensor) and ours.dtype == torch.bfloat16
    _assert_same_function(ours, theirs, catalog.name, args, rounded)
    # The contexts keep the catalog task's batches and slots; what a variant fixed is the definition's now.
    contexts = task.contexts(device)
    assert contexts and all(c.batch_size >= 2 for c in contexts)
    fixed = adapter.fixed_variant_keys
    assert all(not set(c.params.get("variant", {})) & set(fixed) for c in contexts)

    # A destination-passing solution in the definition's layout, bound as the gate binds it.
    n_out = len(d.outputs)

    def run(*tensors: torch.Tensor) -> None:
        inputs, outs = tensors[:-n_out], tensors[-n_out:]
        ret = task._reference_run(*inputs)  # type: ignore[attr-defined]
        for out, value in zip(outs, ret if isinstance(ret, tuple) else (ret,), strict=True):
            assert out.shape == value.shape  # a bf16 reference output is copied into the fp32 buffer
            out.copy_(value)

    kernel = task.bind_entry(run, "run", Path("main.py"), device, dtype)
    assert kernel is not None
    out = kernel(*args)
    _assert_same_function(out[0] if judged_lse else out, theirs, catalog.name, args, rounded)


def test_batch_invariant_solution_passes_and_its_traces_load_in_a_traceset(tmp_path: Path) -> None:
    traces = tmp_path / "row.jsonl"
    r = run_cli(
        "check",
        str(RMSNORM_ROW),
        "--definition",
        str(RMSNORM_DEF),
        "--device",
        "cpu",
        "--seed",
        "3",
        "--trace",
        str(traces),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "rmsnorm_h4096 as rmsnorm" in r.stdout
    ts = _dataset(tmp_path / "dataset", traces, RMSNORM_ROW)
    loaded = ts.traces["rmsnorm_h4096"]
    assert len(loaded) == 2  # one per CPU benchmark workload
    for t in loaded:
        assert t.solution == "rmsnorm_h4096_triton_row" and t.evaluation is not None
        assert t.evaluation.status.value == "PASSED" and t.evaluation.performance is not None
        performance = t.evaluation.performance
        assert performance.latency_ms > 0
        assert t.workload.axes["batch_size"] in (4, 16)
        extra = t.evaluation.correctness.extra  # type: ignore[union-attr]
        bi = extra["batch_invariance"]  # type: ignore[index]
        assert bi["verdict"] == "pass" and bi["stages"]["dynamic"]["verdict"] == "pass"
        # The reference was not timed: null where the schema allows it; in Performance, which forbids
        # null, FlashInfer-Bench's own default for a field nothing measured.
        measured = extra["performance"]  # type: ignore[index]
        assert measured["latency_ms"] == performance.latency_ms
        assert measured["reference_latency_ms"] is None and measured["speedup_factor"] is None
        assert performance.reference_latency_ms == performance.speedup_factor == 0.0
        assert Performance.model_fields["speedup_factor"].default == 0.0
    assert ts.get_solution("rmsnorm_h4096_triton_row") is not None
    assert ts.get_best_trace("rmsnorm_h4096") is not None


def test_violating_solution_is_rejected_and_its_trace_is_never_ranked(tmp_path: Path) -> None:
    static, dynamic = tmp_path / "static.jsonl", tmp_path / "dynamic.jsonl"
    r = run_cli(
        "check",
        str(RMSNORM_SPLIT),
        "--definition",
        str(RMSNORM_DEF),
        "--device",
        "cpu",
        "--json",
        "--trace",
        str(static),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["verdict"] == "bi_violation" and result["task"] == "rmsnorm_h4096 as rmsnorm"
    # Findings point into the solution's own source file.
    assert {(f["file"], f["line"]) for f in result["findings"]} >= {(f"{RMSNORM_SPLIT}:main.py", 50)}
    (t,) = [Trace.model_validate_json(line) for line in static.read_text().splitlines()]
    bi = t.evaluation.correctness.extra["batch_invariance"]  # type: ignore[union-attr,index]
    assert t.evaluation.status.value == "INCORRECT_NUMERICAL"  # type: ignore[union-attr]
    assert bi["verdict"] == "bi_violation" and bi["stages"]["static"]["verdict"] == "reject"

    # Run, the split is caught by the outputs too: the trace carries the first mismatch.
    r = run_cli(
        "check",
        str(RMSNORM_SPLIT),
        "--definition",
        str(RMSNORM_DEF),
        "--device",
        "cpu",
        "--seed",
        "5",
        "--dynamic-only",
        "--trace",
        str(dynamic),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    ts = _dataset(tmp_path / "dataset", dynamic, RMSNORM_SPLIT)
    (t,) = ts.traces["rmsnorm_h4096"]
    assert t.evaluation is not None and t.evaluation.correctness is not None
    bi = t.evaluation.correctness.extra["batch_invariance"]  # type: ignore[index]
    assert bi["verdict"] == "bi_violation" and bi["mismatch"]["differing"] > 0
    assert t.evaluation.correctness.max_absolute_error > 0
    assert t.evaluation.log.startswith("nodice batch invariance: bi_violation — dynamic:")
    assert ts.get_best_trace("rmsnorm_h4096") is None


def _edited(tmp_path: Path, source: Path, filename: str, **changes: object) -> Path:
    data = json.loads(source.read_text())
    for key, value in changes.items():
        target = data
        *parents, leaf = key.split("__")
        for p in parents:
            target = target[p]
        target[leaf] = value
    out = tmp_path / filename
    out.write_text(json.dumps(data))
    return out


def test_what_nodice_cannot_judge_is_one_line_and_exit_2(tmp_path: Path) -> None:
    unmapped = _edited(tmp_path, RMSNORM_DEF, "conv.json", op_type="conv2d")
    other = _edited(tmp_path, RMSNORM_DEF, "other.json", name="rmsnorm_h2048")
    renamed = _edited(
        tmp_path,
        RMSNORM_DEF,
        "renamed.json",
        outputs={"y": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    )
    cuda = _edited(tmp_path, RMSNORM_ROW, "cuda.json", spec__language="cuda")
    cases = [
        (
            RMSNORM_ROW,
            other,
            "bad solution: solution rmsnorm_h4096_triton_row is for definition rmsnorm_h4096, "
            "not rmsnorm_h2048",
        ),
        (RMSNORM_ROW, renamed, "are not a rmsnorm interface nodice adapts"),
        (cuda, RMSNORM_DEF, "is not a C/C++/CUDA source (.cu, .cpp, .cc, .cxx, .c)"),
        (RMSNORM_DEF, RMSNORM_DEF, "is not a FlashInfer-Bench Solution: definition: Field required"),
        (
            RMSNORM_ROW,
            RMSNORM_ROW,
            "bad definition: rmsnorm_h4096_triton_row.json is not a FlashInfer-Bench Definition",
        ),
    ]
    for solution, definition, message in cases:
        with pytest.raises(DefinitionError) as exc:
            prepare(solution, definition, tmp_path / "sources")
        assert message in exc.value.line()

    # Sources whose paths cannot all be files: a file and a folder of one name, the folder itself.
    data = json.loads(RMSNORM_ROW.read_text())
    main = data["sources"][0]
    for i, extra in enumerate((["a", "a/b.py"], ["a/b.py", "a"], ["."])):
        edited = {**data, "sources": [main, *({"path": p, "content": "x = 1\n"} for p in extra)]}
        path = tmp_path / f"paths{i}.json"
        path.write_text(json.dumps(edited))
        with pytest.raises(DefinitionError, match="cannot be written as a file"):
            prepare(path, RMSNORM_DEF, tmp_path / f"paths{i}")

    returns = _edited(tmp_path, RMSNORM_ROW, "returns.json", spec__destination_passing_style=False)
    prepared = prepare(returns, RMSNORM_DEF, tmp_path / "returns")
    with pytest.raises(
        EntryPointError, match="'run' takes 3 positional arguments; the definition rmsnorm_h4096 passes 2"
    ):
        load_kernel(
            prepared.candidate, prepared.entry, get_task(prepared.task), torch.device("cpu"), torch.float32
        )

    # At the command line: one line on stderr, exit code 2.
    r = run_cli("check", str(RMSNORM_ROW), "--definition", str(unmapped), "--device", "cpu")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "bad definition: definition rmsnorm_h4096: op_type 'conv2d' maps to no nodice task "
        "(mapped: dsa_paged, fused_add_rmsnorm, gemm, gqa_paged, gqa_ragged, mla_paged, moe, rmsnorm, "
        "sampling)"
    )


def test_stored_evaluations_export_as_traces_its_loader_reads(tmp_path: Path) -> None:
    """``export_store``'s lines (catalog tasks, no definition file) load with FlashInfer-Bench's model."""
    from nodice.evaluation.export import export_jsonl, trace_records
    from tests.test_evaluation_store import _cheat_evaluation, _passed_evaluation

    passed, cheat = _passed_evaluation(), _cheat_evaluation()
    out = tmp_path / "traces.jsonl"
    assert export_jsonl([passed, cheat], out) == len(passed.scores) + 1
    traces = [Trace.model_validate_json(line) for line in out.read_text().splitlines()]
    assert [t.evaluation.status.value for t in traces] == ["PASSED"] * len(passed.scores) + [
        "INCORRECT_NUMERICAL"
    ]
    for t, score in zip(traces, passed.scores, strict=False):
        assert t.workload.axes == score.params and t.evaluation.performance.latency_ms == score.ms
    verdict = traces[-1].evaluation.correctness.extra["batch_invariance"]
    assert verdict["verdict"] == "cheat" and verdict["cheat_rule"] == "library-call"

    # A pass nothing benchmarked: every Performance field unmeasured (null in extra, left to the model).
    unbenched = dataclasses.replace(passed, scores=[])
    (record,) = trace_records(unbenched)
    assert record["evaluation"]["performance"] == {}
    assert set(record["evaluation"]["correctness"]["extra"]["performance"].values()) == {None}
    t = Trace.model_validate(record)
    assert t.evaluation is not None and t.evaluation.performance == Performance()


def test_static_analysis_reads_the_definitions_batch_sources(tmp_path: Path) -> None:
    """A decode tile chosen from ``kv_indptr``'s length (batch + 1) is a batch-dependent choice; the catalog
    task's subtype contract (split-KV decode) applies to the definition and names FlashInfer's page lists."""
    from nodice.gate.pipeline import check

    base = FIB / "gqa_paged_decode_h4_kv2_d32_ps1_triton_head.json"
    data = json.loads(base.read_text())
    source = data["sources"][0]["content"]
    patched = source.replace(
        "    num_kv_heads = k_cache.shape[2]\n",
        "    num_kv_heads = k_cache.shape[2]\n    block_n = 16 if kv_indptr.shape[0] > 9 else 32\n",
    ).replace("BLOCK_N=BLOCK_N,", "BLOCK_N=block_n,")
    assert patched != source
    data["sources"][0]["content"] = patched
    solution = tmp_path / "tile_from_indptr.json"
    solution.write_text(json.dumps(data))
    definition = FIB / "gqa_paged_decode_h4_kv2_d32_ps1.json"
    verdicts = []
    for path in (base, solution):
        prepared = prepare(path, definition, tmp_path / path.stem)
        r = check(
            str(prepared.candidate),
            prepared.task,
            device="cpu",
            entry=prepared.entry,
            correctness=False,
            dynamic=False,
        )
        verdicts.append(r.verdict)
    assert verdicts == ["pass", "bi_violation"]
    assert any("kv_indptr.shape[0]" in step for f in r.findings for step in f.path)


def _json_error(*args: str) -> dict[str, object]:
    """``nodice check … --json`` that cannot judge: exit 2, one JSON object, its error line on stderr."""
    r = run_cli(*args, "--json", "--device", "cpu")
    assert r.returncode == 2, r.stdout + r.stderr
    payload: dict[str, object] = json.loads(r.stdout)
    assert payload["verdict"] == "error" and payload["exit_code"] == 2
    # One line, never wrapped, though stderr is a pipe and the line is far wider than 80 columns.
    assert r.stderr == f"{payload['error']}\n"
    return payload


def test_every_error_path_of_a_definition_check_prints_one_json_object(tmp_path: Path) -> None:
    deep = tmp_path / ("a_folder_with_a_long_name_" * 6)
    missing = deep / "missing_definition.json"
    unmapped = _edited(tmp_path, RMSNORM_DEF, "conv.json", op_type="conv2d")
    other = _edited(tmp_path, RMSNORM_DEF, "other.json", name="rmsnorm_h2048")
    row = str(RMSNORM_ROW)
    cases = [
        ((row, "--definition", str(missing)), f"bad definition: cannot read {missing}: "),
        (
            (str(deep / "missing_solution.json"), "--definition", str(RMSNORM_DEF)),
            "bad solution: cannot read ",
        ),
        ((row, "--definition", str(unmapped)), "bad definition: definition rmsnorm_h4096: op_type 'conv2d' "),
        (
            (row, "--definition", str(other)),
            "bad solution: solution rmsnorm_h4096_triton_row is for definition",
        ),
        ((row, "--definition", str(RMSNORM_DEF), "--task", "rmsnorm"), "--definition names the task"),
        ((row, "--definition", str(RMSNORM_DEF), "--static-only", "--dynamic-only"), "--static-only and"),
        ((row, "--definition", str(RMSNORM_DEF), "--static-only", "--trace", "t.jsonl"), "--trace records"),
    ]
    for args, start in cases:
        payload = _json_error("check", *args)
        assert str(payload["error"]).startswith(start), payload["error"]
        assert payload["candidate"] == args[0] and payload["findings"] == []
    assert len(str(_json_error("check", row, "--definition", str(missing))["error"])) > 200


def _edited_source(tmp_path: Path, solution: Path, old: str, new: str) -> Path:
    data = json.loads(solution.read_text())
    source = data["sources"][0]["content"]
    assert old in source
    data["sources"][0]["content"] = source.replace(old, new)
    out = tmp_path / solution.name
    out.write_text(json.dumps(data))
    return out


def test_a_crash_on_cpu_says_why_in_one_line(tmp_path: Path) -> None:
    """A solution asserting the definition's bf16 crashes in the sandbox on CPU (fed fp32): the verdict
    is error, and its one line says that nodice runs definitions in fp32 there and how to judge in bf16."""
    strict = _edited_source(
        tmp_path,
        FIB / "rmsnorm_h4096_torch_row.json",
        "    w = weight.float()",
        "    assert hidden_states.dtype == torch.bfloat16\n    w = weight.float()",
    )
    payload = _json_error("check", str(strict), "--definition", str(RMSNORM_DEF))
    error = str(payload["error"])
    assert error.startswith("kernel crashed: AssertionError at main.py:")
    assert error.endswith("run with --device cuda to judge in bfloat16")
    assert "on CPU nodice runs definitions in float32" in error
    r = run_cli("check", str(strict), "--definition", str(RMSNORM_DEF), "--device", "cpu")
    assert r.returncode == 2 and r.stderr == f"{error}\n"


def test_guards_name_the_definitions_inputs(tmp_path: Path) -> None:
    """A fused add + RMSNorm that updates residual in place (as FlashInfer's kernel does) writes into an
    input of the published definition, which declares ``output`` alone: the cheat names the input."""
    in_place = _edited_source(
        tmp_path,
        FIB / "fused_add_rmsnorm_h4096_torch_row.json",
        "        x = hidden_states[i : i + 1].float() + residual[i : i + 1].float()\n",
        "        residual[i : i + 1] += hidden_states[i : i + 1]\n        x = residual[i : i + 1].float()\n",
    )
    r = run_cli("check", str(in_place), "--definition", str(FUSED_DEF), "--device", "cpu", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["verdict"] == "cheat" and result["cheat_rule"] == "input-mutation"
    assert "input residual was modified by the call" in result["reason"]
