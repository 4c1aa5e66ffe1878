"""Anti-cheat rules in-process: each rule fires on its hack and stays quiet on honest code."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pytest
import torch

from nodice.errors import OutputSpecError
from nodice.evaluation.guards import (
    RULES,
    cached_output,
    fake_output,
    harness_tampering,
    library_call,
    precision_downgrade,
    static_violation,
)
from nodice.evaluation.guards.guardian import Guardian
from nodice.gate.execute import check_layout
from nodice.gate.result import CheatDetected
from nodice.gate.runtime import prepare
from nodice.loader import load_candidate
from nodice.tasks import available, get_task

EXAMPLES = Path(__file__).resolve().parent.parent / "nodice" / "examples"
HOSTILE = Path(__file__).parent / "adversarial"
CPU = torch.device("cpu")


def test_every_rule_has_a_name_and_a_description() -> None:
    assert set(RULES) == {
        "library-call",
        "harness-tampering",
        "fake-output",
        "input-mutation",
        "unsynchronized-work",
        "background-thread",
        "uninitialised-memory",
        "precision-downgrade",
        "cached-output",
    }
    assert all(RULES.values())


@pytest.mark.parametrize("task_name", [t for t in available() if (EXAMPLES / t).is_dir()])
def test_static_rules_accept_every_bundled_example(task_name: str) -> None:
    task = get_task(task_name)
    for f in sorted((EXAMPLES / task_name).glob("*.py")):
        assert static_violation(f.read_text(), str(f), task) is None, f.name


def _static(source: str, task_name: str) -> CheatDetected | None:
    return static_violation(source, "cand.py", get_task(task_name))


def test_library_call_static_rule_names_the_call_and_line() -> None:
    hit = _static(
        "import torch\n\ndef kernel(x, w, eps):\n    return torch.rms_norm(x, (4,), w, eps)\n", "rmsnorm"
    )
    assert hit is not None and hit.rule == "library-call" and "cand.py:4" in str(hit)
    assert _static("from torch.nn.functional import rms_norm\n", "rmsnorm") is not None
    assert _static("import flash_attn\n", "rmsnorm") is None  # forbidden for attention, not for norms
    assert _static("import nodice.tasks\n", "rmsnorm") is not None


@pytest.mark.skipif("gemm" not in available(), reason="gemm task not installed")
def test_library_call_static_rule_knows_triton_dot_from_a_matmul() -> None:
    assert _static("def kernel(a, b):\n    return a @ b\n", "gemm") is not None
    assert _static("def kernel(a, b):\n    return a.mm(b)\n", "gemm") is not None
    triton_dot = "import triton.language as tl\n\ndef f(a, b, acc):\n    return tl.dot(a, b, acc)\n"
    assert _static(triton_dot, "gemm") is None


def test_harness_static_rule() -> None:
    for source in (
        "import time\ntime.perf_counter = lambda: 0.0\n",
        "import torch\nsetattr(torch.cuda, 'Event', object)\n",
        "import sys\nf = sys._getframe(1)\n",
        "import os\nos.kill(os.getppid(), 9)\n",
        # A kernel that reads the trace hook can tell when the gate watches its branches.
        "import sys\n\ndef kernel(x):\n    return x if sys.gettrace() is None else x.clone()\n",
    ):
        hit = harness_tampering.static_check(ast.parse(source))
        assert hit is not None, source
    assert harness_tampering.static_check(ast.parse("y = x.clone()\nstate = {}\nstate['k'] = 1\n")) is None


def test_harness_snapshot_sees_a_patched_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    before = harness_tampering.HarnessSnapshot.take()
    assert before.changes(harness_tampering.HarnessSnapshot.take()) == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    changes = before.changes(harness_tampering.HarnessSnapshot.take(hot=True))
    assert any("time.perf_counter" in c for c in changes)


def test_harness_snapshot_takes_the_gates_branch_watch_for_no_tracer(tmp_path: Path) -> None:
    from nodice.gate.branches import BranchWatch

    before = harness_tampering.HarnessSnapshot.take(hot=True)
    seen: list[list[str]] = []
    watch = BranchWatch([], tmp_path / "cand.py")
    watch._undecided = {0}  # as during a watched call of the kernel
    sys.settrace(watch._trace)
    try:
        seen.append(before.changes(harness_tampering.HarnessSnapshot.take(hot=True)))
        sys.settrace(lambda *a: None)  # anyone else's tracer is a replacement
        seen.append(before.changes(harness_tampering.HarnessSnapshot.take(hot=True)))
    finally:
        sys.settrace(None)
    assert seen[0] == [] and "sys.gettrace replaced" in seen[1]


def test_harness_snapshot_looks_through_torchs_own_dynamo_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first import of torch._dynamo (by torch.compile, or any torch function decorated
    # _disable_dynamo when it first runs) wraps torch.manual_seed exactly like this.
    before = harness_tampering.HarnessSnapshot.take()
    original = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(original))
    assert before.changes(harness_tampering.HarnessSnapshot.take()) == []
    # The same wrapper around anything else is a replacement, whatever its __wrapped__ says.
    fake = torch._disable_dynamo(lambda seed: None)
    fake.__wrapped__ = original
    monkeypatch.setattr(torch, "manual_seed", fake)
    assert "torch.manual_seed replaced" in before.changes(harness_tampering.HarnessSnapshot.take())


def test_harness_snapshot_sees_changed_tolerances(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodice.tasks import base

    before = harness_tampering.HarnessSnapshot.take()
    monkeypatch.setitem(base.DEFAULT_TOLERANCES, torch.float32, base.Tolerance(1.0, 1.0))
    assert any("DEFAULT_TOLERANCES" in c for c in before.changes(harness_tampering.HarnessSnapshot.take()))


def test_hot_check_agrees_with_the_full_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import threading
    import types

    from nodice.gate import dynamic

    take = harness_tampering.HarnessSnapshot.take
    baseline = take()
    hot = harness_tampering.HotCheck(baseline)
    assert hot.changes() == []
    full = hot.full_checks
    for _ in range(3):
        assert hot.changes() == []
    assert hot.full_checks == full  # nothing moved: the full comparison is not run again

    fake_dynamic = types.ModuleType(dynamic.__name__)
    fake_dynamic.__dict__.update(vars(dynamic))
    fake_dynamic.validate = lambda *args: None  # type: ignore[attr-defined]
    tamperings = [
        lambda m: m.setattr(time, "perf_counter", lambda: 0.0),
        lambda m: m.setattr(torch.cuda, "synchronize", lambda *args: None),
        lambda m: m.setattr(torch.Tensor, "clone", lambda self: self),
        lambda m: m.setattr(torch.Tensor, "sneaky", lambda self: self, raising=False),
        lambda m: m.setattr(dynamic, "bitwise_diff", lambda e, g: None),
        lambda m: m.setattr(threading, "_trace_hook", lambda *args: None, raising=False),
        lambda m: m.setitem(sys.modules, dynamic.__name__, fake_dynamic),
    ]
    for tamper in tamperings:
        with monkeypatch.context() as m:
            tamper(m)
            expected = baseline.changes(take(hot=True))
            assert expected and hot.changes() == expected
        assert hot.changes() == []
    previous = sys.getprofile()
    sys.setprofile(lambda *args: None)
    try:
        expected = baseline.changes(take(hot=True))
        assert "sys.getprofile replaced" in expected and hot.changes() == expected
    finally:
        sys.setprofile(previous)
    assert hot.changes() == []

    # A move the full comparison does not count (a new module flag) costs it one run, then none.
    with monkeypatch.context() as m:
        m.setattr(time, "nodice_test_flag", 1, raising=False)
        full = hot.full_checks
        assert hot.changes() == [] and hot.changes() == []
        assert hot.full_checks == full + 1


def test_library_watch_sees_calls_by_any_route() -> None:
    task = get_task("rmsnorm")
    library_call.install_reference_tripwire(task)
    watch = library_call.LibraryWatch(library_call.forbidden_for(task))
    x, w = torch.randn(2, 8), torch.ones(8)
    for call in (
        lambda: torch.nn.functional.rms_norm(x, (8,), w, 1e-6),
        lambda: getattr(torch, "rms" + "_norm")(x, (8,), w, 1e-6),
        lambda: get_task("rmsnorm").reference(x, w, 1e-6),
    ):
        watch.hits.clear()
        with library_call.watching(watch):
            call()
        assert watch.hits, call
    watch.hits.clear()
    get_task("rmsnorm").reference(x, w, 1e-6)  # the harness itself may call it: not watched
    with library_call.watching(watch):
        (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)) * w
    assert watch.hits == []


class _LazyTensor(torch.Tensor):
    pass


def test_fake_output_rule() -> None:
    x = torch.randn(4, 8)
    names = ("y",)
    assert fake_output.inspect_outputs(torch.randn(4, 8), (x,), names) is None
    lazy = torch.randn(4, 8).as_subclass(_LazyTensor)
    assert "subclass" in (fake_output.inspect_outputs(lazy, (x,), names) or "")
    assert "meta" in (fake_output.inspect_outputs(torch.empty(4, 8, device="meta"), (x,), names) or "")
    row = torch.randn(1, 8).expand(4, 8)
    assert "overlap in memory" in (fake_output.inspect_outputs(row, (x,), names) or "")
    reason = fake_output.inspect_outputs(x[:, :], (x,), names) or ""
    assert "aliases input" in reason and "allocate the output" in reason and "\n" not in reason
    assert "share memory" in (fake_output.inspect_outputs((x.clone(),) * 2, (), ("a", "b")) or "")


def test_strided_outputs_are_bad_outputs_not_cheats() -> None:
    """A view that keeps every value in its own place accuses nobody; it only breaks the layout contract."""
    x, names, task = torch.randn(4, 8), ("y",), get_task("rmsnorm")
    buffer = torch.randn(2, 4, 8)
    for view in (torch.randn(8, 4).t(), torch.randn(4, 16)[:, :8], torch.randn(4, 8, 2)[..., 0]):
        assert fake_output.inspect_outputs(view, (x,), names) is None
        with pytest.raises(OutputSpecError, match=r"non-contiguous view .*strides .*must be contiguous"):
            check_layout(task, (view,))
    assert fake_output.inspect_outputs((buffer[0], buffer[1]), (x,), ("a", "b")) is None  # one allocation
    check_layout(task, (torch.randn(4, 8),))
    assert fake_output.overlaps_itself(torch.randn(6).as_strided((3, 3), (1, 1)))  # odd strides, shared
    assert not fake_output.overlaps_itself(torch.randn(8).as_strided((3, 2), (2, 3)))  # odd strides, disjoint


def test_precision_downgrade_is_a_band_not_any_error() -> None:
    task = get_task("rmsnorm")
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, CPU, torch.float32)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(4)], gen)
    ref = task.reference(*args)
    x, w, eps = args
    halved = tuple(a.half().float() if isinstance(a, torch.Tensor) else a for a in (x, w))
    downgraded = task.reference(*halved, eps)
    assert precision_downgrade.judge(task, args, ref.clone(), ref, torch.float32) is None
    assert "below float32 precision" in (
        precision_downgrade.judge(task, args, downgraded, ref, torch.float32) or ""
    )
    # An outright wrong result is far beyond any cheaper format: the correctness check's to report.
    assert precision_downgrade.judge(task, args, ref * 2, ref, torch.float32) is None


def test_precision_downgrade_asks_the_kernel_whether_it_sees_moves_below_the_cheaper_format() -> None:
    # An error in the band is not enough once the kernel can be rerun: a kernel that rounds its inputs
    # to fp16 (a cast, or fp16 arithmetic) returns the same outputs for inputs moved by less than half
    # an fp16 ulp; an fp32 kernel whose error is its own arithmetic (a long sum in another order) sees
    # the move as the reference does.
    task = get_task("rmsnorm")
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, CPU, torch.float32)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(4)], gen)
    ref = task.reference(*args)
    low = precision_downgrade.downgrade_error(task, args, ref, torch.float32)

    def half_inputs(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return task.reference(x.half().float(), w.half().float(), eps)

    def half_arithmetic(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        h = x.half()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.half()).float()

    def fp32_off_by_its_arithmetic(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return task.reference(x, w, eps) * (1 + 2 * low)  # in the band, and it follows its inputs

    for kernel in (half_inputs, half_arithmetic):
        verdict = precision_downgrade.judge(
            task, args, kernel(*args), ref, torch.float32, rerun=lambda a, k=kernel: k(*a)
        )
        assert verdict is not None and "leave the outputs unchanged" in verdict, kernel.__name__
    honest = fp32_off_by_its_arithmetic(*args)
    assert precision_downgrade.judge(task, args, honest, ref, torch.float32) is not None  # the band alone
    assert (
        precision_downgrade.judge(
            task, args, honest, ref, torch.float32, rerun=lambda a: fp32_off_by_its_arithmetic(*a)
        )
        is None
    )


def test_round_mantissa() -> None:
    t = torch.tensor([1.0 + 2**-12, 1.0 + 2**-10, 3.0, -1.5 - 3 * 2**-12])
    assert torch.equal(precision_downgrade.round_mantissa(t, 10), t.half().float())
    assert torch.equal(precision_downgrade.round_mantissa(t, 7), t.bfloat16().float())


def _bf16_rmsnorm_case() -> tuple[tuple[torch.Tensor, torch.Tensor, float], torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 1024, generator=gen) * 1.5).bfloat16()
    w = (torch.randn(1024, generator=gen) * 0.1 + 1.0).bfloat16()
    args = (x, w, 1e-6)
    return args, get_task("rmsnorm").reference(*args)


def test_precision_rule_passes_an_honest_kernel_one_ulp_off_everywhere() -> None:
    args, ref = _bf16_rmsnorm_case()
    # The worst an honest fp32-accumulating bf16 kernel does: every output one ulp from the reference.
    one_ulp_off = torch.nextafter(ref.float(), torch.full_like(ref.float(), float("inf"))).bfloat16()
    one_ulp_off = torch.where(one_ulp_off == ref, ref.float().mul(1 + 2**-7).bfloat16(), one_ulp_off)
    task = get_task("rmsnorm")
    assert precision_downgrade.judge(task, args, one_ulp_off, ref, torch.bfloat16) is None


def test_precision_rule_catches_an_fp8_kernel() -> None:
    args, ref = _bf16_rmsnorm_case()
    x, w, eps = args
    fp8 = (x.to(torch.float8_e4m3fn).float(), w.to(torch.float8_e4m3fn).float())
    rstd = torch.rsqrt(fp8[0].pow(2).mean(-1, keepdim=True) + eps)
    out = (fp8[0] * rstd * fp8[1]).bfloat16()
    verdict = precision_downgrade.judge(get_task("rmsnorm"), args, out, ref, torch.bfloat16)
    assert verdict is not None and "below bfloat16 precision" in verdict


def _guard(candidate: str) -> Guardian:
    prepare(CPU)
    torch.randn(1 << 20).sum()  # as the worker does: torch's own thread pool exists before the census
    guardian = Guardian(get_task("rmsnorm"), CPU, torch.float32, seed=3)
    guardian(load_candidate(HOSTILE / candidate, "kernel", 3))
    return guardian


def test_guardian_passes_an_honest_kernel_and_wraps_it() -> None:
    guardian = _guard("control_honest.py")
    assert guardian.violation is None and guardian.guarded is not None and guardian.first_call_ms
    x, w = torch.randn(3, 16), torch.ones(16)
    assert guardian.guarded(x, w, 1e-6).shape == (3, 16)


@pytest.mark.parametrize(
    ("candidate", "rule"),
    [
        ("cheat_pointer_cache.py", "cached-output"),
        ("cheat_stale_memory.py", "uninitialised-memory"),
        ("cheat_precision.py", "precision-downgrade"),
        ("cheat_late_writer.py", "unsynchronized-work"),
        ("cheat_input_mutation.py", "input-mutation"),
        ("cheat_library_runtime.py", "library-call"),
        ("cheat_native_thread.py", "background-thread"),
    ],
)
def test_guardian_probes_name_the_rule(candidate: str, rule: str) -> None:
    with pytest.raises(CheatDetected) as caught:
        _guard(candidate)
    assert caught.value.rule == rule


def test_cached_output_refill_stays_inside_the_tasks_domain() -> None:
    """gdn's gate is a negative log-decay and beta a probability: new values keep them so."""
    task = get_task("gdn")
    gen = torch.Generator().manual_seed(5)
    problem = task.problem(gen, CPU, torch.float32)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(2)], gen)
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
    fresh = task.compose(problem, [task.sample(problem, gen) for _ in range(2)], gen)
    cached_output.refill_in_place(args, gen, fresh)
    g, beta = args[3], args[4]
    assert [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args] == pointers
    for old, new in zip(before[:5], args[:5], strict=True):
        assert not torch.equal(old, new)
    assert bool((g < 0).all()) and bool(((beta > 0) & (beta < 1)).all())
    # Without new draws the values are noise at the inputs' scale, which leaves the domain.
    noisy = task.compose(problem, [task.sample(problem, gen) for _ in range(2)], gen)
    cached_output.refill_in_place(noisy, gen)
    assert bool((noisy[3] > 0).any() or (noisy[4] < 0).any() or (noisy[4] > 1).any())


def test_guardian_passes_a_correct_kernel_that_assumes_the_tasks_domain(tmp_path: Path) -> None:
    """An honest gdn kernel undefined outside the documented domain is not called a cache."""
    source = tmp_path / "domain.py"
    source.write_text(
        "import torch\n\n"
        "def kernel(q, k, v, g, beta, scale):\n"
        "    if bool((g > 0).any()) or bool(((beta <= 0) | (beta >= 1)).any()):\n"
        "        return torch.full_like(v, float('nan'))\n"
        "    b, t, h, dk = q.shape\n"
        "    s = torch.zeros(b, h, dk, v.shape[-1], dtype=torch.float32)\n"
        "    o = torch.empty_like(v)\n"
        "    for i in range(t):\n"
        "        qi, ki, vi = q[:, i].float(), k[:, i].float(), v[:, i].float()\n"
        "        s = s * torch.exp(g[:, i].float())[..., None, None]\n"
        "        u = beta[:, i].float()[..., None] * (vi - torch.einsum('bhk,bhkv->bhv', ki, s))\n"
        "        s = s + ki[..., None] * u[..., None, :]\n"
        "        o[:, i] = (scale * torch.einsum('bhk,bhkv->bhv', qi, s)).to(v.dtype)\n"
        "    return o\n"
    )
    guardian = Guardian(get_task("gdn"), CPU, torch.float32, seed=0)
    guardian(load_candidate(source, "kernel", 6))
    assert guardian.violation is None and guardian.guarded is not None


def test_a_dynamo_wrapper_around_a_dynamo_wrapper_of_the_same_function_is_no_replacement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # After torch._dynamo's first import torch.manual_seed may already be the wrapper; wrapping it
    # again still calls torch's own function.
    once = torch._disable_dynamo(torch.random.manual_seed)
    monkeypatch.setattr(torch, "manual_seed", once)
    before = harness_tampering.HarnessSnapshot.take()
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(once))
    assert before.changes(harness_tampering.HarnessSnapshot.take()) == []
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(torch._disable_dynamo(lambda seed: None)))
    assert before.changes(harness_tampering.HarnessSnapshot.take()) == ["torch.manual_seed replaced"]
