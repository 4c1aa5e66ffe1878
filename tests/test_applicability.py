"""Batch applicability and KernelBench's conventions for ``--reference``.

An operator that couples its samples (a norm over the whole tensor, training-mode BatchNorm, a mean
over the batch, a random draw) gets ``not_applicable`` and never blames the candidate; a per-sample
operator goes on to the gate as before. Modules run in training mode, as KernelBench's harness runs
them, unless ``--eval-mode``; ``--batch-size`` shrinks a problem sized for a larger device, and one
too large for this process is refused before anything is allocated.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from nodice.gate.pipeline import check
from nodice.references import parse_task_name, reference_task_name
from tests.conftest import run_cli

HEADER = """
import torch
from torch import nn
import torch.nn.functional as F
"""

# Each operator couples the samples of a batch; the cause nodice names for it.
COUPLING = {
    "frobenius": (
        """
        class Model(nn.Module):
            def forward(self, x):
                norm = torch.norm(x, p="fro")
                return x / norm

        batch_size = 16
        def get_inputs():
            return [torch.randn(batch_size, 8, 6)]
        """,
        "reduces over every element",
    ),
    "batchnorm_train": (
        """
        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.bn = nn.BatchNorm2d(features)

            def forward(self, x):
                return self.bn(x)

        def get_inputs():
            return [torch.randn(8, 4, 5, 5)]

        def get_init_inputs():
            return [4]
        """,
        "BatchNorm2d 'bn' in training mode",
    ),
    "gemm_batchnorm1d": (
        """
        class Model(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.gemm = nn.Linear(n_in, n_out)
                self.bn = nn.BatchNorm1d(n_out)

            def forward(self, x):
                return torch.relu(self.bn(self.gemm(x)))

        def get_inputs():
            return [torch.randn(12, 16)]

        def get_init_inputs():
            return [16, 8]
        """,
        "BatchNorm1d 'bn' in training mode normalises with statistics over the batch, as KernelBench's "
        "harness runs it; --eval-mode judges the inference form",
    ),
    "mean_over_batch": (
        """
        class Model(nn.Module):
            def forward(self, x):
                return x - x.mean(dim=0, keepdim=True)

        def get_inputs():
            return [torch.randn(10, 32)]
        """,
        "reduces over the batch axis",
    ),
    "dropout_train": (
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.25)

            def forward(self, x):
                return self.drop(torch.tanh(x))

        def get_inputs():
            return [torch.randn(8, 64)]
        """,
        "Dropout 'drop' in training mode draws a random mask, as KernelBench's harness runs it; "
        "--eval-mode judges the inference form (no dropout)",
    ),
    "mse_loss": (
        """
        class Model(nn.Module):
            def forward(self, predictions, targets):
                return torch.mean((predictions - targets) ** 2)

        def get_inputs():
            return [torch.randn(16, 32), torch.randn(16, 32)]
        """,
        "reduces over the batch axis (as a batch-mean loss does)",
    ),
}

FAITHFUL = """
import torch
from torch import nn

from {module} import Model as _Model


class ModelNew(_Model):
    pass
"""

ROWWISE = """
class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        return torch.softmax(self.bn(x), dim=1)

batch_size = 4096

def get_inputs():
    return [torch.randn(batch_size, 24)]

def get_init_inputs():
    return [24]
"""

# A ModelNew computing the same thing with BatchNorm folded as eval mode computes it.
EVAL_FOLDED = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        return torch.softmax((x - bn.running_mean) * scale + bn.bias, dim=1)
"""


def _write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    body = textwrap.dedent(source).lstrip()
    if "get_init_inputs" not in body and "class ModelNew" not in body:
        body += "\n\ndef get_init_inputs():\n    return []\n"
    path.write_text(textwrap.dedent(HEADER).lstrip() + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(COUPLING))
def test_a_coupling_operator_is_not_applicable_and_blames_no_candidate(tmp_path: Path, name: str) -> None:
    source, cause = COUPLING[name]
    ref = _write(tmp_path, f"{name}.py", source)
    cand = _write(tmp_path, "cand.py", FAITHFUL.format(module=name))
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=3)
    assert r.verdict == "not_applicable", (r.verdict, r.reason)
    assert r.exit_code == 2
    assert cause in r.reason
    # Nothing about the candidate was judged.
    assert not r.findings and r.mismatch is None
    assert [s.name for s in r.stages if s.name != "applicability"] == []


def test_the_cli_says_not_applicable_in_one_line_and_json(tmp_path: Path) -> None:
    ref = _write(tmp_path, "frobenius.py", COUPLING["frobenius"][0])
    cand = _write(tmp_path, "cand.py", FAITHFUL.format(module="frobenius"))
    proc = run_cli("check", str(cand), "--reference", str(ref), "--device", "cpu", "--json")
    assert proc.returncode == 2, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["verdict"] == "not_applicable"
    assert payload["exit_code"] == 2
    assert "torch.norm(x, p='fro') reduces over every element" in payload["error"]
    human = run_cli("check", str(cand), "--reference", str(ref), "--device", "cpu")
    assert human.returncode == 2
    assert "NOT_APPLICABLE" in human.stdout
    assert "Traceback" not in human.stdout + human.stderr


def test_training_mode_by_default_eval_mode_on_request(tmp_path: Path) -> None:
    """KernelBench never calls .eval(): a BatchNorm reference couples samples as it runs there; in eval
    mode it is per-sample, and a ModelNew that folds the running statistics passes."""
    ref = _write(tmp_path, "bn_softmax.py", ROWWISE)
    cand = _write(tmp_path, "folded.py", EVAL_FOLDED)
    small = {"batch_size": 16}
    trained = check(cand, reference_task_name(ref, **small), device="cpu", entry="ModelNew", seed=1)
    assert trained.verdict == "not_applicable", trained.reason
    evaluated = check(
        cand, reference_task_name(ref, eval_mode=True, **small), device="cpu", entry="ModelNew", seed=1
    )
    assert evaluated.verdict == "pass", evaluated.reason
    assert evaluated.stage("applicability") is not None


def test_a_per_sample_operator_is_applicable_and_a_violation_is_still_caught(tmp_path: Path) -> None:
    ref = _write(
        tmp_path,
        "softmax.py",
        """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=1)

        def get_inputs():
            return [torch.randn(16, 40)]
        """,
    )
    # Normalises with the max over the whole batch on large batches: a real BI violation.
    cand = _write(
        tmp_path,
        "cand.py",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                shift = x.max() if x.shape[0] >= 8 else x.max(dim=1, keepdim=True).values
                e = torch.exp(x - shift)
                return e / e.sum(dim=1, keepdim=True)
        """,
    )
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=2)
    assert r.stage("applicability").verdict == "pass"
    assert r.verdict == "bi_violation", r.reason
    # The reference itself keeps a sample's bits: the violation is the candidate's own.
    assert not [n for n in r.notes if "itself" in n]
    # No Triton in the candidate: no word of how Triton runs on the CPU.
    assert not [n for n in r.notes if n.startswith("CPU run: Triton")]


def test_a_reference_that_changes_bits_itself_is_named_beside_the_verdict(tmp_path: Path) -> None:
    """A library operator can change a sample's bits with the batch on one device (torch's CPU matmul
    on some CPUs): ``Model`` itself then fails as any candidate that keeps the operator does, and the
    report says so. Here the reference sums each row in another order from batch 4 on: per sample in
    float64 (differences far below the applicability test's 1e-9), another fp32 rounding."""
    ref = _write(
        tmp_path,
        "rowsum.py",
        """
        class Model(nn.Module):
            def forward(self, x):
                if x.shape[0] >= 4:
                    return torch.cumsum(x, dim=1)[:, -1:]
                return x.sum(dim=1, keepdim=True)

        def get_inputs():
            return [torch.randn(16, 256)]
        """,
    )
    cand = _write(tmp_path, "cand.py", FAITHFUL.format(module="rowsum"))
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=5)
    assert r.stage("applicability").verdict == "pass"
    assert r.verdict == "bi_violation", r.reason
    notes = [n for n in r.notes if n.startswith("Model itself (the reference, unchanged)")]
    assert len(notes) == 1 and "not batch-invariant on this device (cpu, float32)" in notes[0]


def test_batch_size_names_travel_and_shrink_through_the_batch_global(tmp_path: Path) -> None:
    ref = _write(tmp_path, "bn_softmax.py", ROWWISE)
    name = reference_task_name(ref, batch_axis=0, batch_size=24, eval_mode=True)
    spec = parse_task_name(name)
    assert (spec.path, spec.batch_axis, spec.batch_size, spec.eval_mode) == (ref.resolve(), 0, 24, True)
    spec = parse_task_name(reference_task_name(ref, batch_axis=1))
    assert (spec.batch_axis, spec.batch_size, spec.eval_mode) == (1, None, False)

    from nodice.tasks import get_task

    task = get_task(name)
    assert task.ref.batch == 24
    assert "batch_size global set to 24 (was 4096)" in task.ref.shrunk
    assert task.describe()["mode"] == "eval"


def test_a_batch_without_a_global_is_shrunk_by_slicing(tmp_path: Path) -> None:
    ref = _write(
        tmp_path,
        "sliced.py",
        """
        class Model(nn.Module):
            def forward(self, x):
                return x * 2

        def get_inputs():
            return [torch.randn(50, 3)]
        """,
    )
    from nodice.tasks import get_task

    task = get_task(reference_task_name(ref, batch_size=7))
    assert task.ref.batch == 7 and task.ref.shrunk == "the first 7 samples of each get_inputs() call"
    proc = run_cli("check", str(ref), "--reference", str(ref), "--batch-size", "80", "--device", "cpu")
    assert proc.returncode == 2
    assert "--batch-size 80 is larger than get_inputs()'s batch of 50" in proc.stderr


def test_a_problem_too_large_for_this_process_is_refused_before_it_is_allocated(tmp_path: Path) -> None:
    # 4096 x 2^22 fp32 = 64 GiB a call: the meta device sizes it without allocating a byte.
    ref = _write(
        tmp_path,
        "huge.py",
        """
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        batch_size = 4096
        dim = 1 << 22

        def get_inputs():
            return [torch.rand(batch_size, dim)]
        """,
    )
    proc = run_cli("check", str(ref), "--reference", str(ref), "--device", "cpu", "--json")
    assert proc.returncode == 2
    payload = json.loads(proc.stdout)
    error = payload["error"]
    assert "one get_inputs() call takes 68.7 GB (batch 4096, 16.8 MB a sample)" in error
    assert "shrink the batch axis with --batch-size N (--batch-size " in error
    assert "\n" not in error
    # Without a batch_size global, --batch-size slices each call's whole batch: it cannot help.
    sliced = tmp_path / "sliced.py"
    sliced.write_text(
        ref.read_text().replace("batch_size = 4096", "rows = 4096").replace("rand(batch_size,", "rand(rows,")
    )
    proc = run_cli("check", str(sliced), "--reference", str(sliced), "--batch-size", "16", "--json")
    payload = json.loads(proc.stdout)
    assert proc.returncode == 2 and payload["reason"] == payload["error"]
    assert "--batch-size 16 cannot help, since the file has no batch_size global" in payload["error"]
    assert "shrink the batch axis" not in payload["error"]


def test_options_of_a_reference_are_refused_with_a_task(tmp_path: Path) -> None:
    proc = run_cli("check", "x.py", "--task", "rmsnorm", "--batch-size", "4", "--eval-mode")
    assert proc.returncode == 2
    assert "--batch-size, --eval-mode apply to --reference only" in proc.stderr
    # With --json every error path prints the one JSON object too.
    missing = tmp_path / "missing.py"
    proc = run_cli("check", "x.py", "--reference", str(missing), "--json")
    assert proc.returncode == 2
    payload = json.loads(proc.stdout)
    assert payload["verdict"] == "error" and payload["error"] == f"bad reference: no such file: {missing}"
    assert payload["reason"] == payload["error"] and payload["task"] == f"reference:{missing.resolve()}"
    proc = run_cli("check", "x.py", "--reference", str(tmp_path), "--json")
    assert f"bad reference: {tmp_path} is a folder: --reference takes one problem file" in proc.stderr


def test_audit_counts_applicable_artifacts_apart_from_their_verdicts(tmp_path: Path) -> None:
    """A folder of KernelBench-style problems audited as they are: each against itself."""
    _write(tmp_path, "frobenius.py", COUPLING["frobenius"][0])
    _write(
        tmp_path,
        "softmax.py",
        """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=1)

        def get_inputs():
            return [torch.randn(16, 40)]
        """,
    )
    proc = run_cli("audit", str(tmp_path), "--device", "cpu", "--seed", "4", "--json")
    assert proc.returncode == 2, proc.stderr
    rows = {Path(r["target"]).name: r for r in json.loads(proc.stdout)}
    assert rows["frobenius.py"]["verdict"] == "not_applicable"
    assert "reduces over every element" in rows["frobenius.py"]["detail"]
    assert rows["softmax.py"]["verdict"] == "pass"

    from nodice.audit import AuditRow, summary

    table = [AuditRow(name, r["task"], r["verdict"], "", "") for name, r in rows.items()]
    table.append(AuditRow("broken.py", "", "error", "", "cannot tell the task"))
    assert summary(table) == (
        "batch-applicable: 1 of 2 (1 couple their samples); on the applicable ones: 1 pass; "
        "1 could not be judged"
    )


def test_a_square_shared_operand_is_named_as_the_likely_cause(tmp_path: Path) -> None:
    """KernelBench's square matmul passes B with N rows, as many as A's: sliced per sample it breaks,
    and the report says which inputs were sliced and what to do, instead of blaming coupling."""
    ref = _write(
        tmp_path,
        "square.py",
        """
        class Model(nn.Module):
            def forward(self, A, B):
                return torch.matmul(A, B)

        N = 24

        def get_inputs():
            return [torch.randn(N, N), torch.randn(N, N)]
        """,
    )
    cand = _write(tmp_path, "cand.py", FAITHFUL.format(module="square"))
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=1)
    assert r.verdict == "not_applicable"
    assert "inputs 0 (A), 1 (B) all have the batch's length on the batch axis" in r.reason
    assert "make it a parameter of Model" in r.reason and "depends on other samples" not in r.reason
