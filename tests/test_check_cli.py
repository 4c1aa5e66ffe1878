"""`nodice check` from the command line: verdicts, exit codes, JSON, and bad input as one line."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nodice.tasks import get_task
from tests.conftest import EXAMPLES, run_cli

RMSNORM = EXAMPLES / "rmsnorm"

GOOD_KERNEL = """
import torch

def kernel(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
"""

BAD_INPUTS = {
    "syntax_error": ("def kernel(x, weight, eps)\n    return x\n", "syntax error in cand.py:1"),
    "import_error": ("import not_a_module_nodice\n" + GOOD_KERNEL, "ModuleNotFoundError"),
    "import_raises_two_lines": (
        "raise ValueError('first\\nsecond')\n" + GOOD_KERNEL,
        "importing cand.py failed at cand.py:1: ValueError: first …",
    ),
    "no_kernel": ("def other(x, weight, eps):\n    return x\n", "defines no 'kernel'"),
    "not_callable": ("kernel = 3\n", "is not callable"),
    "wrong_arity": ("def kernel(x, weight):\n    return x\n", "the task passes 3"),
    "raises": (
        "def kernel(x, weight, eps):\n    raise RuntimeError('boom')\n",
        "RuntimeError at cand.py:2: boom",
    ),
    "segfault": (
        "import ctypes\n\ndef kernel(x, weight, eps):\n    return ctypes.string_at(0)\n",
        "worker killed by SIGSEGV",
    ),
    # Status 0 from a process that never reported: ended from inside, and where.
    "exits": (
        "import os\n\ndef kernel(x, weight, eps):\n    os._exit(0)\n",
        "worker exited with status 0 in the anti-cheat probes before reporting (the process was ended "
        "from inside: os._exit",
    ),
    # A sandboxed worker is out of a terminal's reach: the interrupt is the kernel's own, a crash.
    "interrupts": (
        "def kernel(x, weight, eps):\n    raise KeyboardInterrupt\n",
        "KeyboardInterrupt at cand.py:2",
    ),
    "wrong_shape": (
        GOOD_KERNEL.replace("return (", "return (") + "\n_k = kernel\n"
        "def kernel(x, weight, eps):\n    return _k(x, weight, eps)[:, :-1]\n",
        "has shape",
    ),
    "wrong_dtype": (
        GOOD_KERNEL + "\n_k = kernel\ndef kernel(x, weight, eps):\n    return _k(x, weight, eps).double()\n",
        "has dtype torch.float64",
    ),
    "not_a_tensor": ("def kernel(x, weight, eps):\n    return [1, 2]\n", "outputs"),
    "import_exit": (
        "import sys\nsys.exit(4)\n\ndef kernel(x, weight, eps):\n    return x\n",
        "called exit(4) while importing",
    ),
    # Refused before anything runs: the file never binds its entry point.
    "no_entry": ("import sys\nsys.exit(4)\n", "defines no 'kernel'"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_candidate_gets_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    source, expected = BAD_INPUTS[case]
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    proc = run_cli("check", str(cand), "--task", "rmsnorm", "--device", "cpu", "--seed", "3")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]


def test_missing_file_and_unknown_task(tmp_path: Path) -> None:
    missing = run_cli("check", str(tmp_path / "nope.py"), "--task", "rmsnorm", "--device", "cpu")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"cannot load candidate: no such file: {tmp_path / 'nope.py'}"
    ]
    unknown = run_cli("check", str(RMSNORM / "seed.py"), "--task", "layernorm2", "--device", "cpu")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().startswith("unknown task: 'layernorm2'")
    assert "Traceback" not in unknown.stderr


def test_a_nul_byte_is_named_by_its_line(tmp_path: Path) -> None:
    from nodice.errors import NodiceError
    from nodice.loader import check_source

    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n\ndef kernel(x, weight, eps):\n    return x\x00\n")
    with pytest.raises(NodiceError, match=r"cand\.py:4: source code string cannot contain null bytes"):
        check_source(cand, "kernel")


def test_hanging_kernel_times_out(tmp_path: Path) -> None:
    cand = tmp_path / "hang.py"
    cand.write_text("import time\n\ndef kernel(x, weight, eps):\n    time.sleep(3600)\n")
    # Stuck outside the candidate's files (a helper it imports from elsewhere): the line names the
    # innermost frame of the worker's main thread, not the outermost one.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text(
        "import time\n\ndef block(x, weight, eps):\n    time.sleep(3600)\n"
    )
    (tmp_path / "cand").mkdir()
    outside = tmp_path / "cand" / "uses_helper.py"
    outside.write_text(
        f"import sys\n\nsys.path.insert(0, {str(tmp_path / 'lib')!r})\nfrom helper import block as kernel\n"
    )
    # A fixed limit on the whole evaluation: the worker (a fork of the shared server) reaches the call in
    # about a second, and the limit's value is only what the line must repeat. Both hangs wait out
    # their limit side by side.
    args = ("--task", "rmsnorm", "--device", "cpu", "--timeout", "8")
    with ThreadPoolExecutor(2) as pool:
        proc, helper = pool.map(lambda path: run_cli("check", str(path), *args), (cand, outside))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("timed out after 8 s in the anti-cheat probes (fixed 8 s limit"), line
    assert line.endswith("stuck at hang.py:4 in kernel")
    proc = helper
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.endswith("/lib/helper.py:4 in block, outside the candidate's files"), line
    assert "; stuck at " in line and "runpy" not in line


def test_seed_passes_and_json_shape_is_stable() -> None:
    proc = run_cli(
        "check", str(RMSNORM / "seed.py"), "--task", "rmsnorm", "--device", "cpu", "--json", "--seed", "5"
    )
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert {"verdict", "task", "candidate", "stages", "findings", "mismatch", "error", "exit_code"} <= set(d)
    assert d["verdict"] == "pass" and d["task"] == "rmsnorm" and d["error"] is None
    assert d["device"] == "cpu" and d["dtype"] == "float32"
    assert {"correctness", "dynamic"} <= set(d["stages"])
    for stage in d["stages"].values():
        assert set(stage) >= {"verdict", "ms"} and stage["ms"] >= 0
    assert d["stages"]["dynamic"]["stats"]["contexts"] >= 10
    assert any("TRITON_INTERPRET" in n for n in d["notes"])


def test_violation_json_reports_first_mismatch() -> None:
    proc = run_cli(
        "check",
        str(RMSNORM / "torch_path_small_batch.py"),
        "--task",
        "rmsnorm",
        "--device",
        "cpu",
        "--json",
        "--seed",
        "5",
        "--dynamic-only",
    )
    assert proc.returncode == 1, proc.stderr
    d = json.loads(proc.stdout)
    assert d["verdict"] == "bi_violation"
    assert "correctness" not in d["stages"] and d["stages"]["dynamic"]["verdict"] == "reject"
    m = d["mismatch"]
    assert set(m) >= {"context", "index", "expected", "got"}
    assert m["expected"] != m["got"]
    assert m["context"]["batch_size"] > 1 and 0 <= m["context"]["position"] < m["context"]["batch_size"]


def test_human_output_names_verdict_and_context() -> None:
    dyn = run_cli(
        "check",
        str(RMSNORM / "split_rows_small_batch.py"),
        "--task",
        "rmsnorm",
        "--device",
        "cpu",
        "--seed",
        "2",
        "--dynamic-only",
    )
    assert dyn.returncode == 1
    assert "BI_VIOLATION" in dyn.stdout and "first mismatch" in dyn.stdout and "context:" in dyn.stdout
    # The full gate stops at static analysis, with the finding's line, dependency path and repair.
    full = run_cli(
        "check", str(RMSNORM / "split_rows_small_batch.py"), "--task", "rmsnorm", "--device", "cpu"
    )
    assert full.returncode == 1
    assert "BI_VIOLATION" in full.stdout and "split_rows_small_batch.py:" in full.stdout
    assert "fix:" in full.stdout and "dynamic" not in full.stdout.split("note:")[0]


def test_tasks_lists_signatures() -> None:
    proc = run_cli("tasks", "--json")
    assert proc.returncode == 0
    names = {t["name"]: t for t in json.loads(proc.stdout)}
    assert "rmsnorm" in names
    assert names["rmsnorm"]["signature"].startswith("kernel(x[B,H]")
    assert len(names["rmsnorm"]["workloads"]) >= 3
    # The workloads a CPU run is scored on (what `evolve --workload` takes there), by name.
    small = [w.name for w in get_task("attention_varlen").small_workloads()]
    assert small and [w["name"] for w in names["attention_varlen"]["cpu_workloads"]] == small
    assert f"on a CPU (Triton's interpreter): {', '.join(small)}" in run_cli("tasks").stdout


def test_a_kernel_that_needs_cuda_says_how_to_judge_it_on_a_cpu(tmp_path: Path) -> None:
    cand = tmp_path / "cuda_only.py"
    cand.write_text(
        "import torch\n\n\ndef kernel(x, weight, eps):\n"
        '    assert x.is_cuda, "Tensors must be on CUDA."\n'
        "    return x * weight\n"
    )
    proc = run_cli("check", str(cand), "-t", "rmsnorm", "--device", "cpu", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert "Tensors must be on CUDA." in error and "a kernel that needs CUDA runs with --device cuda" in error
    # A crash with no word of CUDA gets no such hint.
    cand.write_text("def kernel(x, weight, eps):\n    raise ValueError('no rows')\n")
    proc = run_cli("check", str(cand), "-t", "rmsnorm", "--device", "cpu", "--json")
    assert "no rows" in json.loads(proc.stdout)["error"] and "--device cuda" not in proc.stdout
