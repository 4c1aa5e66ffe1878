"""Module-level numbers read inside @triton.jit: the interpreter takes them, a GPU compile does not;
the gate says so in a note (CPU)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from nodice.gate.pipeline import check
from nodice.gate.static.triton_globals import nonconstexpr_globals
from tests.conftest import ROOT

SOURCE = textwrap.dedent(
    """\
    import triton
    import triton.language as tl

    BIG = 2**31 - 1
    SCALE = 0.5
    ALLOWED = tl.constexpr(7)
    RESET = 1
    RESET = compute()
    CHUNK: int = 64


    @triton.jit(do_not_specialize=["n"])
    def _a(x_ptr, n, SCALE: tl.constexpr):
        x = tl.load(x_ptr)
        y = tl.where(x > 0, BIG, ALLOWED)  # BIG is read; SCALE is the parameter
        tl.store(x_ptr, y * SCALE + RESET)


    @triton.jit
    def _b(x_ptr):
        CHUNK = 32  # a local of the same name
        tl.store(x_ptr, tl.load(x_ptr) + CHUNK)


    @triton.jit
    def _c(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) * CHUNK)


    def host(n):
        return n * BIG  # not a jitted function
    """
)


def test_reads_of_literal_globals_inside_jitted_functions_are_found() -> None:
    reads = nonconstexpr_globals(SOURCE)
    assert [(r.function, r.name, r.value) for r in reads] == [
        ("_a", "BIG", "2 ** 31 - 1"),
        ("_c", "CHUNK", "64"),
    ]
    line = next(i for i, text in enumerate(SOURCE.splitlines(), 1) if "BIG, ALLOWED" in text)
    assert reads[0].line == line


def test_a_file_that_does_not_parse_has_none() -> None:
    assert nonconstexpr_globals("def broken(:\n") == []


def test_the_gate_notes_it_and_still_judges_the_kernel(tmp_path: Path) -> None:
    seed = (ROOT / "nodice" / "examples" / "rmsnorm" / "seed.py").read_text()
    source = seed.replace("@triton.jit\n", "ROWS_PER_PROGRAM = 1\n\n\n@triton.jit\n", 1).replace(
        "row = tl.program_id(0)", "row = tl.program_id(0) * ROWS_PER_PROGRAM"
    )
    assert source != seed
    path = tmp_path / "cand.py"
    path.write_text(source)
    result = check(path, "rmsnorm", device="cpu", correctness=False, dynamic=False, seed=0)
    assert result.verdict == "pass", result.reason
    notes = [n for n in result.notes if "ROWS_PER_PROGRAM" in n]
    assert len(notes) == 1 and "tl.constexpr(1)" in notes[0] and "_rmsnorm_row" in notes[0]
    clean = check(
        ROOT / "nodice" / "examples" / "rmsnorm" / "seed.py",
        "rmsnorm",
        device="cpu",
        correctness=False,
        dynamic=False,
        seed=0,
    )
    assert not [n for n in clean.notes if "@triton.jit function" in n]
