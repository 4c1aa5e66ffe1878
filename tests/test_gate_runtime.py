"""The CPU runtime (nodice.gate.runtime.prepare): Triton's interpreter patches the language once a launch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from nodice.gate.runtime import prepare

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="Triton's interpreter runs the CPU gate")


@triton.jit
def _doubled(x):
    return x * 2.0


@triton.jit
def _row_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    # A helper of this module and one of triton.language (tl.sum's combine function) in every program.
    tl.store(out_ptr + row, tl.sum(_doubled(x), axis=0))


def test_a_launch_patches_the_language_once_whatever_its_helper_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepare(torch.device("cpu"))
    from triton.runtime import interpreter

    patched = []
    original = interpreter._patch_builtin

    def counted(*args: Any) -> Any:
        patched.append(args[0])
        return original(*args)

    monkeypatch.setattr(interpreter, "_patch_builtin", counted)
    per_launch = []
    # The first launch rewrites the helpers (which adds names to their modules): count the later ones.
    for rows in (2, 2, 16):
        x = torch.arange(rows * 5, dtype=torch.float32).reshape(rows, 5)
        out = torch.empty(rows)
        patched.clear()
        _row_sums[(rows,)](x, out, 5, BLOCK=8)
        per_launch.append(len(patched))
        torch.testing.assert_close(out, 2 * x.sum(dim=1), rtol=0, atol=0)
    # 16 programs call the helpers 32 times: the patching is the launch's, not theirs.
    assert per_launch[1] == per_launch[2] > 0, per_launch


def test_values_of_one_shape_share_it_and_a_bad_shape_is_refused_as_before() -> None:
    prepare(torch.device("cpu"))
    first, again = (
        tl.block_type(tl.float32, [2, 1024, 4]),
        tl.block_type(tl.float32, [2, tl.constexpr(1024), 4]),
    )
    assert again.shape is first.shape and again.numel == first.numel == 8192
    assert again.name == first.name == "<['2', '1024', '4'], fp32>"
    assert first.with_element_ty(tl.int32).name == "<['2', '1024', '4'], int32>"
    x, y = tl.tensor(None, first), tl.tensor(None, again)
    assert y.shape is x.shape and [s.value for s in x.shape] == [2, 1024, 4] and x.numel.value == 8192
    assert tl.tensor(None, tl.float32).shape == tl.tensor(None, tl.int32).shape == ()
    # A shape against a list of ints (as broadcasting compares them): the same constexpr as before.
    same = first.shape == [2, 1024, 4]
    assert isinstance(same, tl.constexpr) and same.value is True
    assert first.shape != [2, 1024, 8] and first.shape != [2, 1024] and x.shape == [2, 1024, 4]
    # Scalar types: the same object, or another of the same name, is equal; nothing else is.
    assert tl.float32 == tl.float32 and tl.dtype("fp32") == tl.float32 and tl.float32 != tl.float16
    assert tl.float32 != "fp32" and tl.float32 == tl.constexpr(tl.float32)
    for _ in range(2):  # a refused shape is never remembered
        with pytest.raises(ValueError, match="power of 2"):
            tl.block_type(tl.float32, [2, 3])


def test_a_blocks_numpy_dtype_is_its_elements() -> None:
    import numpy as np
    from triton.runtime import interpreter

    prepare(torch.device("cpu"))
    for element, held in ((tl.float32, np.float32), (tl.bfloat16, np.uint16), (tl.int1, bool)):
        assert interpreter._get_np_dtype(tl.block_type(element, [4, 8])) == np.dtype(held)
        assert interpreter._get_np_dtype(element) == np.dtype(held)
    pointers = tl.block_type(tl.pointer_type(tl.float16), [16])
    assert interpreter._get_np_dtype(pointers) == np.dtype(np.uint64)


@triton.jit
def _scaled_index(x_ptr, out_ptr, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * scale + 7)


def test_the_overflow_checks_the_interpreter_drops_are_not_computed_and_debug_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without debug, the interpreter computed each 32-bit ``+``/``*``'s overflow check and then
    dropped its assertion; the values are int32's wrap-around either way, as on a GPU."""
    import dataclasses

    from triton.language.semantic import TritonSemantic
    from triton.runtime import interpreter

    prepare(torch.device("cpu"))
    checks = []  # the overflow checks computed: each ends in an assertion, kept or dropped
    original = TritonSemantic.device_assert

    def counted(self: Any, cond: Any, msg: str, mask: Any) -> Any:
        checks.append(msg)
        return original(self, cond, msg, mask)

    monkeypatch.setattr(TritonSemantic, "device_assert", counted)
    x = torch.tensor([1, 3, 2**20, 2**30 - 1], dtype=torch.int32)
    out = torch.empty_like(x)
    _scaled_index[(1,)](x, out, 4099, BLOCK=4)
    wrapped = ((x.to(torch.int64) * 4099 + 7 + 2**31) % 2**32 - 2**31).to(torch.int32)
    assert torch.equal(out, wrapped) and not torch.equal(out.to(torch.int64), x.to(torch.int64) * 4099 + 7)
    assert checks == []
    # A builder in debug mode computes them, and asserts.
    builder = interpreter.interpreter_builder
    debug = dataclasses.replace(builder.options, debug=True, sanitize_overflow=True)
    monkeypatch.setattr(builder, "options", debug)
    prepare(torch.device("cpu"))
    with pytest.raises(Exception, match="int32 overflow detected for operation mul"):
        _scaled_index[(1,)](x, out, 4099, BLOCK=4)
    assert checks == ["int32 overflow detected for operation mul"]
