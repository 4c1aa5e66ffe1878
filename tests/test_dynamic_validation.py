"""Dynamic validation on CPU: what a mismatch report says, and how often the gate reads the device."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from nodice.gate.dynamic import RERUN_ALONE, DynamicReport, validate
from nodice.tasks import get_task
from nodice.tasks.rmsnorm import rms_norm_fp32

CPU = torch.device("cpu")
HERE = Path(__file__)
# Elements of a row that a faulty kernel below changes. rmsnorm's CPU contexts (nodice/tasks/rmsnorm.py):
# batches of 2 … 64 rows of 1024, then the hidden-64 sweep, whose batch of 65 is the largest and is
# run again at the end; 63 witnesses beside the target.
PERTURBED = (3, 7)


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rms_norm_fp32(x, weight, eps).to(x.dtype)


def _next_up(y: torch.Tensor, rows: Any) -> torch.Tensor:
    """``y`` with the elements ``PERTURBED`` of ``rows`` one ulp further from zero (bit pattern + 1)."""
    bits = y.view(torch.int32)
    for col in PERTURBED:
        bits[rows, col] += 1
    return y


def _validate(kernel: Callable[..., Any], task: str = "rmsnorm", seed: int = 1) -> DynamicReport:
    return validate(get_task(task), kernel, HERE, CPU, torch.float32, seed)


def _one_ulp_apart(expected: float, got: float) -> bool:
    e = torch.tensor(expected, dtype=torch.float32).view(torch.int32)
    g = torch.tensor(got, dtype=torch.float32).view(torch.int32)
    return int(g) - int(e) == 1


def test_a_mismatch_names_the_first_context_element_and_count() -> None:
    def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = _rmsnorm(x, weight, eps)
        return _next_up(y, slice(None)) if x.shape[0] == 17 else y

    r = _validate(kernel)
    m = r.mismatch
    assert m is not None
    # The first batch of 17 rows, the target (the first tracked sample), its first perturbed element.
    assert m.context["name"] == "batch=17,first" and m.context["batch_size"] == 17
    assert m.sample == "target" and m.output == "y" and m.context["position"] == 0
    assert m.index == [PERTURBED[0]] and (m.differing, m.total) == (len(PERTURBED), 1024)
    assert _one_ulp_apart(m.expected, m.got)
    assert r.contexts[-1] == "batch=17,first"


def test_a_mismatch_in_a_witness_alone_is_found_and_placed() -> None:
    # Only the last row of the batches of 64 differs: in "batch=64,first" the target is row 0 and the
    # 63 witnesses fill every other row, so the report must find the one witness that differs.
    def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = _rmsnorm(x, weight, eps)
        return _next_up(y, -1) if x.shape[0] == 64 else y

    m = _validate(kernel).mismatch
    assert m is not None and m.context["name"] == "batch=64,first"
    assert m.sample.startswith("witness ") and m.context["position"] == 63
    assert m.index == [PERTURBED[0]] and m.differing == len(PERTURBED)
    assert _one_ulp_apart(m.expected, m.got)


def test_a_sample_that_only_differs_from_run_to_run_is_named_so_even_if_run_alone_once() -> None:
    # Only the first RERUN_ALONE tracked samples run twice alone. A kernel whose output for one
    # later witness's row changes every time it sees that row again (a nondeterminism tied to its
    # data) first shows in a context; the gate runs that witness alone again and reports the
    # batch-1 rerun, not the context. A deterministic difference in the same place stays a context's.
    seen: Counter[bytes] = Counter()
    flaky_row: list[bytes] = []

    def flaky_witness(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = _rmsnorm(x, weight, eps)
        for i in range(x.shape[0]):
            key = x[i].numpy().tobytes()
            if x.shape[0] == 1 and not seen[key] and len(seen) == RERUN_ALONE + 1:
                flaky_row.append(key)  # witness RERUN_ALONE + 1, run alone once
            if flaky_row and key == flaky_row[0] and seen[key]:
                _next_up(y, i)
            seen[key] += 1
        return y

    r = _validate(flaky_witness)
    m = r.mismatch
    assert m is not None and m.sample == f"witness {RERUN_ALONE + 1}"
    assert m.context["name"] == "batch=1,rerun" and m.context["batch_size"] == 1
    assert r.contexts[0] == "batch=1,rerun" and len(r.contexts) > 1  # it first differed in a context
    assert m.index == [PERTURBED[0]] and m.differing == len(PERTURBED)

    def batch_dependent(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = _rmsnorm(x, weight, eps)
        return _next_up(y, slice(1, None)) if x.shape[0] == 17 else y  # every row but the first

    m = _validate(batch_dependent).mismatch
    assert m is not None and m.context["name"] == "batch=17,first" and m.sample.startswith("witness ")


def test_run_to_run_differences_are_caught_alone_and_in_the_largest_batch() -> None:
    calls: Counter[int] = Counter()

    def flaky_alone(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        calls[x.shape[0]] += 1
        y = _rmsnorm(x, weight, eps)
        return _next_up(y, 0) if x.shape[0] == 1 and calls[1] == 2 else y

    m = _validate(flaky_alone).mismatch
    assert m is not None and m.context["name"] == "batch=1,rerun" and m.sample == "target"
    assert m.index == [PERTURBED[0]] and m.differing == len(PERTURBED)

    calls.clear()

    def flaky_big(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        calls[x.shape[0]] += 1
        y = _rmsnorm(x, weight, eps)
        # The batch of 65 runs once as a context, then twice more on the same inputs.
        return _next_up(y, slice(None)) if x.shape[0] == 65 and calls[65] == 3 else y

    r = _validate(flaky_big)
    m = r.mismatch
    assert m is not None and m.context["name"] == "H=64,batch=65,middle,rerun" and m.sample == "target"
    assert m.context["position"] == 32 and (m.differing, m.total) == (len(PERTURBED), 64)
    assert r.contexts[-1] == "H=64,batch=65,middle,rerun"


class _HostReads(TorchFunctionMode):
    """Counts the calls that read tensor data back to the host (a device synchronisation on a GPU),
    outside the kernel under test."""

    READS = frozenset({"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "equal"})

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.in_kernel = False

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", "")
        if not self.in_kernel and name in self.READS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def test_one_device_read_per_context_for_a_passing_kernel() -> None:
    reads = _HostReads()

    def kernel(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> Any:
        reads.in_kernel = True
        try:
            return get_task("add_rmsnorm").reference(x, residual, weight, eps)
        finally:
            reads.in_kernel = False

    with reads:
        r = _validate(kernel, "add_rmsnorm")
    assert r.mismatch is None and r.contexts_run >= 20
    # add_rmsnorm has two outputs and 64 tracked rows: one comparison per context for all of them,
    # the batch-1 rerun and the final rerun included.
    assert reads.counts["equal"] == r.contexts_run
    # The only other reads are of the CPU generator's witness slots (one per batch context; the
    # reruns, alone and of the largest batch, draw none).
    batches = sum(not name.endswith(",rerun") for name in r.contexts)
    assert batches == len(get_task("add_rmsnorm").contexts(CPU))
    assert reads.counts == Counter({"equal": r.contexts_run, "tolist": batches})
    assert set(r.phases) == {"inputs", "kernel", "select", "compare"}
    assert all(ms >= 0 for ms in r.phases.values()) and r.phases["kernel"] <= r.kernel_ms + 1e-6


def test_ragged_tasks_read_their_offsets_once_for_many_samples() -> None:
    reads = _HostReads()
    for name in ("attention_varlen", "dsa"):
        task = get_task(name)
        gen = torch.Generator().manual_seed(0)
        problem = task.problem(gen, CPU, torch.float32)
        samples = task.samples(problem, gen, 5)
        args = task.compose(problem, samples, gen)
        out = torch.randn(task.output_spec(args)[0][0], generator=gen)
        with reads:
            many = task.select_many(out, [4, 0, 2], args)
        assert reads.counts["tolist"] == 1
        reads.counts.clear()
        for got, i in zip(many, [4, 0, 2], strict=True):
            (one,) = task.select(out, i, args)
            assert len(got) == 1 and got[0].data_ptr() == one.data_ptr() and got[0].shape == one.shape


def test_packed_outputs_give_back_the_same_bits() -> None:
    from nodice.gate.dynamic import _Packed

    gen = torch.Generator().manual_seed(0)
    outs = [
        (torch.randn(4, 6, generator=gen)[:, ::2], torch.arange(3, dtype=torch.int16)),
        (torch.tensor(float("nan")), torch.tensor([True, False])),
        (torch.tensor([-0.0, 0.0], dtype=torch.float16), torch.arange(2, dtype=torch.int64)),
    ]
    packed = _Packed.of(outs)
    for i, sample in enumerate(outs):
        for back, t in zip(packed.sample(i), sample, strict=True):
            assert (back.shape, back.dtype) == (t.shape, t.dtype)
            assert torch.equal(
                back.contiguous().view(-1).view(torch.uint8), t.contiguous().view(-1).view(torch.uint8)
            )
    assert torch.equal(packed.prefix(1), _Packed.of(outs[:1]).data)
