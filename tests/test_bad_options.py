"""Options and files nodice cannot use get one line and exit 2, before any work is done: unusable
limits and seeds, result stores and trace files that cannot be written, damaged run folders, files
that do not parse or never bind their entry point (``--static-only`` too), and a ``--batch-size``
that would grow the reference's batch."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

SEED = EXAMPLES / "rmsnorm" / "seed.py"


def _one_line_error(proc, expected: str) -> None:  # type: ignore[no-untyped-def]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and expected in lines[0], out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--timeout", "-1"], "--timeout must be a positive number of seconds, not -1.0"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds, not nan"),
        (["--timeout", "inf"], "--timeout must be a positive number of seconds, not inf"),
        (["--timeout", "5", "--no-sandbox"], "--timeout needs the sandbox"),
        (["--seed", "99999999999999999999999"], "--seed must be between 0 and 2**63 - 1"),
        (["--seed", "-3"], "--seed must be between 0 and 2**63 - 1, not -3"),
    ],
)
def test_unusable_limits_and_seeds_are_refused(args: list[str], expected: str) -> None:
    _one_line_error(run_cli("check", str(SEED), "--task", "rmsnorm", "--device", "cpu", *args), expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bench", "e2e", "--seed", str(2**64)], f"--seed must be between 0 and 2**63 - 1, not {2**64}"),
        (["bench", "e2e", "-c", "4", "-c", "0"], "--concurrency must be 1 or more, not 0"),
        (["bench", "kernels", "--task", "rmsnorm", "--seed", "-1"], "--seed must be between 0 and 2**63 - 1"),
        (["bench", "detector", "--seed", str(2**63)], "--seed must be between 0 and 2**63 - 1"),
        (["audit", str(SEED), "--task", "rmsnorm", "--timeout", "nan"], "--timeout must be a positive"),
        (["audit", str(SEED), "--task", "rmsnorm", "--seed", "-2"], "--seed must be between 0 and 2**63 - 1"),
    ],
)
def test_unusable_limits_and_seeds_are_refused_by_every_command(args: list[str], expected: str) -> None:
    _one_line_error(run_cli(*args, "--device", "cpu"), expected)


def test_a_store_that_cannot_be_used_is_refused_before_the_gate(tmp_path: Path) -> None:
    folder = tmp_path / "a_folder"
    folder.mkdir()
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("not a database\n")
    for store, expected in ((folder, "is a folder"), (not_sqlite, "file is not a database")):
        proc = run_cli("check", str(SEED), "--task", "rmsnorm", "--device", "cpu", "--store", str(store))
        _one_line_error(proc, expected)
        assert "static" not in proc.stdout  # refused before any stage ran
    assert not_sqlite.read_text() == "not a database\n"  # and left as it was
    proc = run_cli(
        "check", str(SEED), "--task", "rmsnorm", "--device", "cpu", "--store", str(folder), "--json"
    )
    assert proc.returncode == 2 and json.loads(proc.stdout)["verdict"] == "error"


def test_a_trace_file_that_cannot_be_written_is_refused_before_the_gate(tmp_path: Path) -> None:
    proc = run_cli(
        "check", "solution.json", "--definition", "definition.json", "--device", "cpu",
        "--trace", str(tmp_path),
    )  # fmt: skip
    _one_line_error(proc, "is a folder")
    proc = run_cli(
        "check", "solution.json", "--definition", "definition.json", "--device", "cpu",
        "--trace", str(tmp_path / "missing" / "t.jsonl"),
    )  # fmt: skip
    _one_line_error(proc, "no such folder")


FIB = EXAMPLES / "flashinfer_bench"


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        ("solution.json", "--trace {dir}/solution.json is the same file as the solution"),
        ("definition.json", "--trace {dir}/definition.json is the same file as --definition"),
        ("sub/../solution.json", "is the same file as the solution"),
        ("link.json", "--trace {dir}/link.json is the same file as the solution"),  # a symlink to it
        ("hard.json", "--trace {dir}/hard.json is the same file as --definition"),  # a hard link to it
    ],
)
def test_a_trace_file_that_is_an_input_is_refused_and_left_as_it_was(
    tmp_path: Path, trace: str, expected: str
) -> None:
    solution, definition = tmp_path / "solution.json", tmp_path / "definition.json"
    shutil.copy(FIB / "rmsnorm_h4096_triton_row.json", solution)
    shutil.copy(FIB / "rmsnorm_h4096.json", definition)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to(solution)
    (tmp_path / "hard.json").hardlink_to(definition)
    before = {p: p.read_bytes() for p in (solution, definition)}
    args = ("check", str(solution), "--definition", str(definition), "--device", "cpu")
    proc = run_cli(*args, "--trace", str(tmp_path / trace))
    _one_line_error(proc, expected.format(dir=tmp_path))
    assert "static" not in proc.stdout  # refused before any stage ran
    assert {p: p.read_bytes() for p in before} == before
    assert (tmp_path / "link.json").is_symlink()
    payload = json.loads(run_cli(*args, "--trace", str(tmp_path / trace), "--json").stdout)
    assert payload["verdict"] == "error" and "is the same file as" in payload["error"]
    assert {p: p.read_bytes() for p in before} == before


_SOLUTION = (
    "check",
    str(FIB / "rmsnorm_h4096_triton_row.json"),
    "--definition",
    str(FIB / "rmsnorm_h4096.json"),
)


@pytest.mark.parametrize(
    ("command", "first", "second"),
    [
        (("bench", "e2e"), "--json", "--markdown"),
        (("bench", "kernels", "--task", "rmsnorm"), "--json", "--markdown"),
        (("bench", "detector"), "--json", "--markdown"),
        (("bench", "detector"), "--markdown", "--progress"),
        (_SOLUTION, "--trace", "--store"),
    ],
)
def test_two_outputs_on_one_file_are_refused_before_any_work(
    tmp_path: Path, command: tuple[str, ...], first: str, second: str
) -> None:
    out = tmp_path / "report.json"
    out.write_text("an earlier report\n")
    for same in (out, tmp_path / "sub" / ".." / "report.json", tmp_path / "alias.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        if same.name == "alias.json" and not same.is_symlink():
            same.symlink_to(out)
        proc = run_cli(*command, "--device", "cpu", first, str(out), second, str(same), timeout=120)
        _one_line_error(proc, f"{first} and {second} name one file ({out})")
        assert out.read_text() == "an earlier report\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def kernel(x, weight, eps)\n    return x\n", "syntax error in cand.py:1"),
        ("", "cand.py defines no 'kernel'"),
        ("import torch\n\ndef other(x, weight, eps):\n    return x\n", "cand.py defines no 'kernel'"),
        ("kernel = 42\n", "'kernel' in cand.py is not callable"),
    ],
)
@pytest.mark.parametrize("mode", [[], ["--static-only"]])
def test_a_file_that_cannot_be_judged_is_refused_in_every_mode(
    tmp_path: Path, source: str, expected: str, mode: list[str]
) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    _one_line_error(run_cli("check", str(cand), "--task", "rmsnorm", "--device", "cpu", *mode), expected)


@pytest.mark.parametrize(
    "source",
    [
        # Bindings the loader finds without running the file: nested in module-level blocks, imported,
        # or made by code that binds names dynamically (left to the import).
        "import torch\nif True:\n    def kernel(x, weight, eps):\n        return x.clone()\n",
        "import torch\ntry:\n    import missing_module\nexcept ImportError:\n"
        "    kernel = lambda x, w, e: x.clone()\n",
        "import torch\ndef _setup():\n    global kernel\n    kernel = lambda x, w, e: x.clone()\n_setup()\n",
        "from torch import clone as kernel\n",
        # A literal first, the function after it: the last binding is what runs.
        "kernel = None\n\ndef kernel(x, weight, eps):\n    return x.clone()\n",
    ],
)
def test_entry_points_bound_in_blocks_or_dynamically_are_not_refused(tmp_path: Path, source: str) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    proc = run_cli("check", str(cand), "--task", "rmsnorm", "--device", "cpu", "--static-only")
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--budget", "0"], "--budget must be 1 or more, not 0"),
        (["--budget", "-1"], "--budget must be 1 or more, not -1"),
        (["--stagnation", "0"], "--stagnation must be 1 or more"),
        (["--time-budget", "-5"], "--time-budget must be a positive number of seconds, not -5.0"),
        (["--time-budget", "nan"], "--time-budget must be a positive number of seconds, not nan"),
        (["--launch-timeout", "0"], "--launch-timeout must be a positive number of seconds"),
    ],
)
def test_unusable_run_limits_are_refused_and_leave_no_run(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    run = tmp_path / "run"
    _one_line_error(run_cli("evolve", "rmsnorm", "--device", "cpu", "--run-dir", str(run), *args), expected)
    assert not run.exists()


def test_an_unknown_task_lists_the_catalog_only() -> None:
    proc = run_cli("evolve", "no_such_task", "--device", "cpu")
    _one_line_error(proc, "unknown task: 'no_such_task' (known tasks: rmsnorm, add_rmsnorm, layernorm,")
    assert "definition" not in proc.stderr and "reference_file" not in proc.stderr


def test_a_run_folder_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli("evolve", "rmsnorm", "--device", "cpu", "--budget", "1", "--run-dir", str(blocker / "run"))
    _one_line_error(proc, "cannot create the run folder")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "run"
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "1", "--run-dir", str(run), "--no-report"
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run


_RESUME = ("evolve", "rmsnorm", "--device", "cpu", "--budget", "2", "--run-dir")


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def test_a_damaged_journal_is_one_line_in_every_command(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path)
    (run / "results.sqlite").write_text("garbage\n")
    for command in (
        ["report", str(run)],
        ["evolve", "rmsnorm", "--device", "cpu", "--budget", "2", "--run-dir", str(run), "--no-report"],
        ["run", "lineage", "--run-dir", str(run)],
    ):
        _one_line_error(run_cli(*command), "cannot read the run's journal")


def test_a_damaged_run_config_is_one_line_in_every_command(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path)
    resume = [*_RESUME, str(run), "--no-report"]
    for content, command, expected in (
        (b"[]\n", ["report", str(run)], "run.json is damaged: it holds list, not an object"),
        (b"\xff\xfe{", ["run", "status", "--run-dir", str(run)], "run.json is damaged: 'utf-8' codec"),
        (b'{"task": "rmsnorm", "device": "cpu", "budget": "ten"}', resume, '"ten", not an integer or null'),
        (
            b'{"device": "cpu"}',
            ["run", "lineage", "--run-dir", str(run)],
            "run.json is damaged: it has no task",
        ),
    ):
        (run / "run.json").write_bytes(content)
        _one_line_error(run_cli(*command), expected)
        assert (run / "run.json").read_bytes() == content


def test_a_run_whose_files_are_in_the_way_is_one_line(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path)
    shutil.rmtree(run / "workspace")
    (run / "workspace").write_text("not a folder\n")
    _one_line_error(run_cli(*_RESUME, str(run), "--no-report"), "workspace is not a folder")
    assert (run / "workspace").read_text() == "not a folder\n"
    run = _copy(finished_run, tmp_path / "second")
    (run / "report.html").unlink(missing_ok=True)
    (run / "report.html").mkdir()
    _one_line_error(run_cli("report", str(run)), "report.html: Is a directory")
    assert not (run / "report.html.tmp").exists()


def test_run_status_json_names_the_error_in_json(tmp_path: Path) -> None:
    proc = run_cli("run", "status", "--json", "--run-dir", str(tmp_path))
    _one_line_error(proc, "is not a nodice run")
    assert json.loads(proc.stdout) == {"error": f"{tmp_path} is not a nodice run", "exit_code": 2}


def test_a_state_cache_that_is_not_an_object_is_rebuilt(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path)
    (run / "state.json").write_text("[1, 2]\n")
    # The budget already spent: the resumed run rebuilds the cache from the journal and stops.
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "1", "--run-dir", str(run), "--no-report"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert isinstance(json.loads((run / "state.json").read_text()), dict)


def test_a_run_that_lost_its_lineage_is_not_restarted_at_v0(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path)
    with sqlite3.connect(run / "results.sqlite") as db:
        committed = db.execute(
            "SELECT COUNT(*) FROM evolution_attempts WHERE outcome='committed'"
        ).fetchone()[0]
    assert committed >= 1
    shutil.rmtree(run / ".git")
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "2", "--run-dir", str(run), "--no-report"
    )
    _one_line_error(proc, f"has no lineage (.git) but its journal records {committed} committed versions")
    assert not (run / ".git").exists()


def test_a_batch_size_larger_than_the_references_batch_is_refused(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text(
        "import torch\nimport torch.nn as nn\n\nbatch_size = 6\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, 3)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    proc = run_cli("check", str(ref), "--reference", str(ref), "--batch-size", "7", "--device", "cpu")
    _one_line_error(proc, "--batch-size 7 is larger than get_inputs()'s batch of 6")


def test_a_reference_with_an_empty_batch_is_refused(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text(
        "import torch\nimport torch.nn as nn\n\nbatch_size = 0\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, 3)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    proc = run_cli("check", str(ref), "--reference", str(ref), "--device", "cpu")
    _one_line_error(proc, "get_inputs() gives a batch of 0 samples")


def test_a_definition_whose_reference_raises_does_not_blame_the_solution(tmp_path: Path) -> None:
    fib = EXAMPLES / "flashinfer_bench"
    definition = json.loads((fib / "rmsnorm_h4096.json").read_text())
    assert "def run(" in definition["reference"]
    definition["reference"] = definition["reference"].replace(
        "def run(", "def run(*args, **kwargs):\n    raise ValueError('reference broke')\n\ndef _run(", 1
    )
    broken = tmp_path / "definition.json"
    broken.write_text(json.dumps(definition))
    proc = run_cli(
        "check", str(fib / "rmsnorm_h4096_triton_row.json"), "--definition", str(broken), "--device", "cpu"
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "bad definition: definition rmsnorm_h4096: its reference raised ValueError at line 5: reference broke"
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["check", str(SEED), "--task", "rmsnorm", "--bogus"], "usage: No such option: --bogus"),
        (
            ["check", str(SEED), "--task", "rmsnorm", "--timeout", "abc"],
            "usage: Invalid value for '--timeout'",
        ),
        (["tasks", "rmsnorm"], "usage: Got unexpected extra argument(s) (rmsnorm)"),
        (["audit"], "usage: Invalid value: give files, folders, dotted callables or --baseline NAME"),
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_what_the_parser_refuses_is_one_line_and_json_under_json(
    args: list[str], expected: str, as_json: bool
) -> None:
    proc = run_cli(*args, *(["--json"] if as_json else []))
    _one_line_error(proc, expected)
    assert "--help`)" in proc.stderr  # where to look
    if as_json:
        payload = json.loads(proc.stdout)
        assert payload["verdict"] == "error" and payload["exit_code"] == 2 and expected in payload["error"]
    else:
        assert proc.stdout == ""


def test_help_and_no_arguments_still_show_the_help() -> None:
    proc = run_cli("check", "--help")
    assert proc.returncode == 0 and "--reference" in proc.stdout
    proc = run_cli()
    assert proc.returncode == 2 and "Usage:" in proc.stdout + proc.stderr and "check" in proc.stdout


def test_a_folder_given_as_the_candidate_is_named_a_folder(tmp_path: Path) -> None:
    proc = run_cli("check", str(tmp_path), "--task", "rmsnorm", "--device", "cpu")
    _one_line_error(proc, f"cannot load candidate: a folder, not a file: {tmp_path}")


def test_audit_names_a_missing_file_and_a_name_that_does_not_import(tmp_path: Path) -> None:
    missing = tmp_path / "nofile.py"
    proc = run_cli("audit", str(missing), "torch.nn.functional.nonexistent", "--device", "cpu", "--json")
    rows = {r["target"]: r for r in json.loads(proc.stdout)}
    assert rows[str(missing)]["detail"] == f"no such file: {missing}"
    assert (
        "cannot import torch.nn.functional.nonexistent" in rows["torch.nn.functional.nonexistent"]["detail"]
    )
    assert proc.returncode == 2


def test_the_seeds_diff_says_there_is_nothing_before_it(finished_run: Path) -> None:
    proc = run_cli("run", "show", "0", "--diff", "--run-dir", str(finished_run))
    assert proc.returncode == 0 and "v0 is the seed: no earlier version to compare with" in proc.stdout


def test_compare_refuses_one_run_given_twice(finished_run: Path) -> None:
    proc = run_cli("compare", str(finished_run), str(finished_run / "."))
    _one_line_error(proc, "is given as both runs: compare two different runs")
