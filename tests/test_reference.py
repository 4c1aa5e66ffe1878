"""Any PyTorch reference as a task (KernelBench convention): ``nodice check NEW.py --reference REF.py``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from nodice.gate.pipeline import check
from nodice.gate.static import run_static
from nodice.references import ReferenceSpec, parse_task_name, reference_task_name
from nodice.tasks import get_task
from tests.conftest import EXAMPLES, run_cli

REF_DIR = EXAMPLES / "reference"
MODEL = REF_DIR / "model.py"
SEED = REF_DIR / "seed.py"
SPLIT = REF_DIR / "split_rows_small_batch.py"
TASK = reference_task_name(MODEL)

# A reference whose samples are columns (batch axis 1) and which takes a float passed through unchanged.
COLUMNS_REF = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x, scale: float):
        return torch.softmax(x * scale, dim=0)


def get_inputs():
    return [torch.randn(32, 6), 0.5]


def get_init_inputs():
    return []
"""


def _write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def _eager_rmsnorm(weight_name: str) -> str:
    """A ModelNew in eager PyTorch whose weight (initialised to ones) is called ``weight_name``."""
    return f"""
    import torch
    from torch import nn


    class ModelNew(nn.Module):
        def __init__(self, hidden, eps=1e-6):
            super().__init__()
            self.{weight_name} = nn.Parameter(torch.ones(hidden))
            self.eps = eps

        def forward(self, x):
            rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
            return x * rstd * self.{weight_name}
    """


def test_task_name_round_trips_the_file_and_batch_axis(tmp_path: Path) -> None:
    ref = _write(tmp_path, "ref.py", COLUMNS_REF)
    assert parse_task_name(reference_task_name(ref)) == ReferenceSpec(ref.resolve(), 0)
    assert parse_task_name(reference_task_name(ref, 2)) == ReferenceSpec(ref.resolve(), 2)


def test_triton_model_new_passes_the_whole_gate() -> None:
    proc = run_cli("check", str(SEED), "--reference", str(MODEL), "--device", "cpu", "--seed", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "pass"
    assert result["task"] == TASK
    for stage in ("static", "guards", "correctness", "dynamic"):
        assert result["stages"][stage]["verdict"] == "pass", stage
    assert result["stages"]["dynamic"]["stats"]["contexts"] >= 18  # 6 batch sizes, 3 positions
    assert result["notes"][0].startswith("CPU run: Triton kernels run under TRITON_INTERPRET=1")


def test_split_count_from_batch_is_caught_statically() -> None:
    r = check(SPLIT, TASK, device="cpu", entry="ModelNew", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation" and r.exit_code == 1
    splits = [f for f in r.findings if f.protected == "NUM_SPLITS"]
    assert splits and splits[0].mechanism == "work_partitioning"
    assert any("batch source: x.shape[0]" in step for step in splits[0].path)
    assert splits[0].line == 60


def test_split_count_from_batch_is_caught_dynamically() -> None:
    r = check(SPLIT, TASK, device="cpu", entry="ModelNew", static=False, correctness=False, seed=0)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.output == "out"
    assert r.mismatch.context["batch_size"] > 1


def test_model_weights_reach_model_new_by_name(tmp_path: Path) -> None:
    # Model's weight is 1 + 0.1·randn; a ModelNew keeping the name gets it and is correct, one that
    # renames it keeps its own ones and is not.
    same = _write(tmp_path, "same_name.py", _eager_rmsnorm("weight"))
    r = check(same, TASK, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason
    renamed = _write(tmp_path, "renamed.py", _eager_rmsnorm("scale"))
    r = check(renamed, TASK, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "incorrect" and r.exit_code == 1
    assert "outside atol=0.01" in r.reason


def test_batch_axis_one_and_values_passed_through(tmp_path: Path) -> None:
    ref = _write(tmp_path, "columns.py", COLUMNS_REF)
    task = reference_task_name(ref, 1)
    per_column = _write(
        tmp_path,
        "per_column.py",
        """
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def forward(self, x, scale):
                cols = [torch.softmax(x[:, j].contiguous() * scale, dim=0) for j in range(x.shape[1])]
                return torch.stack(cols, dim=1)
        """,
    )
    r = check(per_column, task, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason
    by_width = _write(
        tmp_path,
        "by_width.py",
        """
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def forward(self, x, scale):
                columns = x.shape[1]
                if columns < 4:
                    e = torch.exp(x * scale - (x * scale).max(dim=0).values)
                    return e / e.sum(dim=0)
                return torch.softmax(x * scale, dim=0)
        """,
    )
    r = check(by_width, task, device="cpu", entry="ModelNew", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation"
    assert any("batch source: x.shape[1]" in step for f in r.findings for step in f.path)


_NO_GET_INPUTS = """
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_init_inputs():
    return []
"""

_TWO_BATCHES = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(16, 64), torch.randn(64, 32)]


def get_init_inputs():
    return []
"""

_REDUCES_THE_BATCH = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum()


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def test_the_baseline_is_the_eager_model() -> None:
    import torch

    from nodice.measuring.baselines import load_baselines
    from nodice.tasks import get_task

    cpu = torch.device("cpu")
    loaded, missing = load_baselines(TASK, cpu)
    assert list(loaded) == ["PyTorch Model"] and not missing
    task = get_task(TASK)
    args = task.workload_inputs(task.workloads()[0], torch.Generator().manual_seed(0), cpu, torch.float32)
    # Model in fp32 on fp32 inputs is the reference itself, bit for bit.
    assert torch.equal(loaded["PyTorch Model"](*args), task.reference(*args))


@pytest.mark.parametrize(
    ("ref_source", "axis", "candidate", "expected"),
    [
        (None, 0, "class ModelNew: pass\n", "bad entry point: 'ModelNew' in new.py is not a torch.nn.Module"),
        (None, 0, "def kernel(x):\n    return x\n", "bad entry point: new.py defines no 'ModelNew'"),
        (
            None,
            0,
            "from torch import nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, h):\n"
            "        super().__init__()\n        raise ValueError('boom')\n",
            "bad entry point: ModelNew(*get_init_inputs()) failed at new.py:6: ValueError: boom",
        ),
        (
            None,
            0,
            "from torch import nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, h):\n"
            "        super().__init__()\n\n    def forward(self, x):\n        return x[:, :8].contiguous()\n",
            "bad output: out has shape (1, 8), expected (1, 1024)",
        ),
        (None, 2, None, "bad reference: model.py: input 0 (x) has shape (16, 1024), no batch axis 2"),
        (_NO_GET_INPUTS, 0, None, "bad reference: ref.py defines no get_inputs"),
        (_TWO_BATCHES, 0, None, "bad reference: ref.py: input 1 (b) has 64 on batch axis 0, input 0 (a)"),
        (
            _REDUCES_THE_BATCH,
            0,
            None,
            "not batch-applicable: ref.py: the output of Model has shape () for a batch of 16",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, ref_source: str | None, axis: int, candidate: str | None, expected: str
) -> None:
    ref = MODEL if ref_source is None else _write(tmp_path, "ref.py", ref_source)
    new = SEED if candidate is None else _write(tmp_path, "new.py", candidate)
    r = check(new, reference_task_name(ref, axis), device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == ("not_applicable" if expected.startswith("not batch") else "error")
    assert r.exit_code == 2
    assert r.error is not None and r.error.startswith(expected), r.error
    assert "\n" not in r.error


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    ref = _write(tmp_path, "ref.py", _NO_GET_INPUTS)
    proc = run_cli("check", str(SEED), "--reference", str(ref), "--device", "cpu")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bad reference: ref.py defines no get_inputs (a reference")
    proc = run_cli("check", str(SEED), "--reference", str(MODEL), "--task", "rmsnorm")
    assert proc.returncode == 2 and proc.stderr.strip() == "give either --task T or --reference REF.py"


def test_evolve_from_a_triton_seed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_cli(
        "evolve", "--reference", str(MODEL), "--seed", str(SEED), "--device", "cpu",
        "--budget", "2", "--run-dir", str(run), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "#1 seed: committed -> v0" in proc.stdout
    assert "2 evaluations" in proc.stdout
    assert "best baseline" in proc.stdout  # the eager Model, timed in the same evaluation
    config = json.loads((run / "run.json").read_text())
    assert config["task"] == TASK and config["entry"] == "ModelNew" and config["unit"] == "GB/s"


def test_evolve_without_a_seed_starts_from_the_reference_itself(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_cli(
        "evolve", "--reference", str(MODEL), "--device", "cpu", "--budget", "1",
        "--run-dir", str(run), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "#1 seed: committed -> v0" in proc.stdout
    kernel = (run / "workspace" / "kernel.py").read_text()
    assert kernel.startswith(MODEL.read_text().rstrip("\n"))
    assert "class ModelNew(Model):" in kernel


# A reduction over a dimension given by get_init_inputs(), and each sample's output one number.
DIM_REF = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmin(x, dim=self.dim)


def get_inputs():
    return [torch.randn(8, 12, 6)]


def get_init_inputs():
    return [1]
"""

SUM_REF = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x).sum(dim=1)


def get_inputs():
    return [torch.randn(8, 4096)]


def get_init_inputs():
    return []
"""


def test_init_inputs_are_constants_to_the_static_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `x.shape[self.dim]` with dim = 1 from get_init_inputs() is a per-sample length, not the batch:
    # an argmin through integer positions passes statically.
    ref = _write(tmp_path, "argmin.py", DIM_REF)
    cand = _write(
        tmp_path,
        "first_index.py",
        """
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim

            def forward(self, x):
                mn = torch.amin(x, dim=self.dim, keepdim=True)
                n = x.shape[self.dim]
                shape = [1] * x.dim()
                shape[self.dim] = n
                pos = torch.arange(n, device=x.device).view(shape)
                return torch.where(x == mn, pos, torch.full_like(pos, n)).amin(dim=self.dim)
        """,
    )
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason
    static = r.stage("static")
    assert static is not None and static.verdict == "pass"
    # Negative control: with the init input unknown, `x.shape[self.dim]` may be the batch size.
    task = get_task(reference_task_name(ref))
    assert task.init_values() == (1,)
    assert run_static(cand, task, entry="ModelNew") == ([], [])
    monkeypatch.setattr(task, "init_values", lambda: None)
    violations, _ = run_static(cand, task, entry="ModelNew")
    assert violations and "depend on the batch" in violations[0].message


def test_a_per_sample_number_that_differs_prints_both_values(tmp_path: Path) -> None:
    # Each sample's output is a 0-d tensor: the mismatch names the two numbers, not two NaNs.
    ref = _write(tmp_path, "sigmoid_sum.py", SUM_REF)
    cand = _write(
        tmp_path,
        "tanh_form.py",
        """
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def forward(self, x):
                if x.shape[0] >= 4:
                    return (0.5 * (1.0 + torch.tanh(0.5 * x))).sum(dim=1)
                return torch.sigmoid(x).sum(dim=1)
        """,
    )
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", static=False, seed=0)
    assert r.verdict == "bi_violation" and r.mismatch is not None
    assert r.mismatch.index == [] and r.mismatch.expected != r.mismatch.got
    line = r.mismatch.line()
    assert f"out expected {r.mismatch.expected!r}, got {r.mismatch.got!r} (1/1" in line, line
    assert "nan" not in line


def test_a_strided_output_is_judged_by_its_values(tmp_path: Path) -> None:
    # KernelBench compares values: a transposed view of the right numbers is a correct output.
    ref = _write(
        tmp_path,
        "scale.py",
        """
        import torch
        from torch import nn


        class Model(nn.Module):
            def forward(self, x):
                return x * 2.0


        def get_inputs():
            return [torch.randn(8, 6, 5)]


        def get_init_inputs():
            return []
        """,
    )
    cand = _write(
        tmp_path,
        "transposed.py",
        """
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def forward(self, x):
                return (x.transpose(1, 2).contiguous() * 2.0).transpose(1, 2)
        """,
    )
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason


def _elementwise(body: str) -> str:
    """A reference file whose Model returns ``body`` of its input ``x[8, 6]``."""
    return f"""
    import torch
    from torch import nn


    class Model(nn.Module):
        def forward(self, x):
            return {body}


    def get_inputs():
        return [torch.randn(8, 6)]


    def get_init_inputs():
        return []
    """


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("x * float('nan')", "NaN at out[0, 0] for finite inputs"),
        ("x.abs() * float('inf')", "no finite value in out for finite inputs (out[0, 0] is inf)"),
    ],
    ids=["nan", "inf"],
)
def test_a_reference_with_no_number_to_compare_is_refused_not_passed(
    tmp_path: Path, body: str, why: str
) -> None:
    """Before, any ModelNew passed correctness against it (a NaN compares as within tolerance)."""
    ref = _write(tmp_path, "ref.py", _elementwise(body))
    new = _write(
        tmp_path,
        "new.py",
        "from torch import nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n",
    )
    proc = run_cli("check", str(new), "--reference", str(ref), "--device", "cpu", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    line = f"bad reference: ref.py: Model returns {why}: no candidate can be judged against it"
    assert payload["verdict"] == "error" and payload["error"] == line
    assert proc.stderr == f"{line}\n"


def test_an_infinity_among_finite_values_is_matched_exactly(tmp_path: Path) -> None:
    """log(relu(x)) is -inf where x <= 0, a value of the operation: the same -inf passes, a finite
    stand-in there is incorrect (before, anything passed wherever the reference was infinite)."""
    ref = _write(tmp_path, "ref.py", _elementwise("torch.log(torch.relu(x))"))
    task = reference_task_name(ref)
    same = _write(
        tmp_path,
        "same.py",
        "import torch\nfrom torch import nn\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.log(torch.relu(x))\n",
    )
    floored = _write(
        tmp_path,
        "floored.py",
        "import torch\nfrom torch import nn\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.log(torch.relu(x) + 1e-30)\n",
    )
    passed = check(same, task, device="cpu", entry="ModelNew", dynamic=False, seed=0)
    assert passed.verdict == "pass", passed.reason
    rejected = check(floored, task, device="cpu", entry="ModelNew", dynamic=False, seed=0)
    assert rejected.verdict == "incorrect" and rejected.exit_code == 1
    assert rejected.reason.endswith("reference -inf (a non-finite reference value is matched exactly)")
