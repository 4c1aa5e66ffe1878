"""A crashing candidate's one-line reason: where in its file, and why (the gate's crash line)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from nodice.gate.execute import describe_exception

# A kernel that reads a module-level int: the interpreter accepts it, Triton's compiler for a GPU
# does not ("Cannot access global variable ... from within @jit'ed function"). kernel() compiles
# it for Hopper, as a first launch on an H200 would; no GPU is needed to reach the error.
CANDIDATE = textwrap.dedent(
    """\
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    BIG = 2**31 - 1


    def _first(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        m = tl.max(x, axis=0)
        a = tl.min(tl.where(x == m, offs, BIG), axis=0)
        tl.store(out_ptr, a)


    _first = JITFunction(_first)  # @triton.jit


    def kernel(x):
        src = ASTSource(fn=_first, signature={"x_ptr": "*fp32", "out_ptr": "*i32", "BLOCK": "constexpr"},
                        constexprs={"BLOCK": 64})
        return triton.compile(src, target=GPUTarget("cuda", 90, 32))
    """
)


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("crash_candidate", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Triton's compiler, outside the interpreter (the test session runs under TRITON_INTERPRET=1, which
# patches triton.language for the interpreter).
DRIVER = textwrap.dedent(
    """\
    import importlib.util, sys
    from pathlib import Path
    from nodice.errors import KernelCrashError
    from nodice.gate.execute import call_kernel
    path = Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        call_kernel(mod.kernel, (None,), path)
    except KernelCrashError as exc:
        print(exc)
    """
)


def test_a_triton_compilation_error_names_the_kernel_line_and_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "cand.py"
    path.write_text(CANDIDATE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    line = proc.stdout.strip()
    src = CANDIDATE.splitlines()
    failing = next(i for i, text in enumerate(src, 1) if "BIG), axis=0)" in text)
    launch = next(i for i, text in enumerate(src, 1) if "return triton.compile" in text)
    assert line.startswith(f"CompilationError at cand.py:{failing} (launched at line {launch}): "), (
        line or proc.stderr[-2000:]
    )
    assert "Cannot access global variable BIG" in line and "\n" not in line


def test_other_exceptions_keep_their_first_line(tmp_path: Path) -> None:
    path = tmp_path / "cand.py"
    path.write_text("def kernel(x):\n    raise ValueError('bad shape\\nmore detail')\n")
    mod = _load(path)
    try:
        mod.kernel(None)
    except ValueError as exc:
        assert describe_exception(exc, path) == "ValueError at cand.py:2: bad shape"
        assert describe_exception(exc, None) == "ValueError: bad shape"
