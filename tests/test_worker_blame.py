"""Whose fault an exception the worker did not expect is: the candidate's, a file the candidate is
judged against (the reference, a FlashInfer-Bench definition's reference, a contract), or nobody's
file at all (the task's own inputs that did not fit)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodice.evaluation.worker_main import _blame, _out_of_memory


def _raiser(path: Path, exc: BaseException):  # type: ignore[no-untyped-def]
    """A function defined in ``path`` that raises ``exc`` (so the traceback has a frame there)."""
    path.write_text("def boom(exc):\n    raise exc\n")
    spec = importlib.util.spec_from_file_location(f"blame_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.boom


def _caught(fn, exc: BaseException) -> BaseException:  # type: ignore[no-untyped-def]
    try:
        fn(exc)
    except BaseException as caught:
        return caught
    raise AssertionError("did not raise")


def test_the_reference_and_a_contract_are_named_and_the_candidate_is_not(tmp_path: Path) -> None:
    cand, ref, contract = tmp_path / "cand.py", tmp_path / "ref.py", tmp_path / "contract.py"
    job = SimpleNamespace(path=str(cand), task=f"reference:{ref}", contracts=(str(contract),))
    err = _caught(_raiser(ref, ValueError("x")), ValueError("x"))
    assert _blame(err, job) == "the reference ref.py:2"
    err = _caught(_raiser(contract, ValueError("x")), ValueError("x"))
    assert _blame(err, job) == "the contract contract.py:2"
    err = _caught(_raiser(cand, ValueError("x")), ValueError("x"))
    assert _blame(err, job) == ""


def test_a_definitions_reference_is_named_by_its_compiled_name() -> None:
    namespace: dict = {}
    exec(compile("def run():\n    raise ValueError('r')\n", "<gemm_n4096.reference>", "exec"), namespace)
    job = SimpleNamespace(path="/nowhere/cand.py", task="flashinfer:/nowhere/d.json", contracts=())
    err = _caught(lambda _: namespace["run"](), ValueError("r"))
    assert _blame(err, job) == "the definition's reference (line 2)"


def test_no_one_s_file_on_the_stack_is_no_one_to_blame(tmp_path: Path) -> None:
    job = SimpleNamespace(path=str(tmp_path / "cand.py"), task="rmsnorm", contracts=())
    err = _caught(_raiser(tmp_path / "helper.py", RuntimeError("x")), RuntimeError("x"))
    assert _blame(err, job) is None


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (MemoryError(), True),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4e12 bytes"), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("shape mismatch"), False),
    ],
)
def test_what_counts_as_running_out_of_memory(exc: BaseException, expected: bool) -> None:
    assert _out_of_memory(exc) is expected
