"""A task made from any PyTorch reference file (the KernelBench convention).

``REF.py`` defines ``Model``, ``get_inputs()`` and ``get_init_inputs()``; the
candidate defines ``ModelNew``. A sample is one slice of every tensor input
along the batch axis (dim 0 unless told otherwise), and its output is the same
slice of every output. ``get_inputs()`` gives the full batch and the value
distribution: fresh samples are slices of fresh ``get_inputs()`` calls, so the
gate's batchmates look like the user's data. Values that are not tensors are
passed through unchanged.

``Model`` and ``ModelNew`` are built from ``get_init_inputs()`` under one seed,
then every parameter and buffer of ``Model`` whose name and shape ``ModelNew``
shares is copied into it (so a ``ModelNew`` that keeps ``Model``'s layer names
computes with the same weights even if it initialises them differently); both
run without autograd, in training mode as KernelBench's harness runs them
(``--eval-mode``: eval mode). The reference is ``Model`` in fp32 on the same
inputs upcast to fp32, its outputs cast to the inputs' dtype;
:meth:`ReferenceTask.reference_exact` runs it in float64, which is how the gate
asks whether the operator gives a sample an output of its own at all
(:mod:`nodice.gate.applicability`).

The task travels between processes by name (``nodice.references``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.errors import EntryPointError, ReferenceFileError
from nodice.references import parse_task_name
from nodice.tasks.base import DEFAULT_TOLERANCES, BIContext, Problem, Sample, Task, Tolerance, Workload
from nodice.tasks.reference_file import (
    INIT_SEED,
    ReferenceFile,
    call_user,
    check_fits,
    device_memory,
    read_reference,
    seeded,
)
from nodice.tasks.reference_output import unusable_output

# KernelBench's tolerance (atol = rtol = 1e-2) for fp32 and fp16; bf16 keeps nodice's.
TOLERANCES = {
    torch.float32: Tolerance(atol=1e-2, rtol=1e-2),
    torch.float16: Tolerance(atol=1e-2, rtol=1e-2),
    torch.bfloat16: DEFAULT_TOLERANCES[torch.bfloat16],
}
# Batch sizes of the contexts (and the reference's own batch), kept to what fits these input bytes.
_SIZES = {"cpu": [2, 3, 8, 17, 64], "cuda": [2, 3, 8, 31, 64, 132, 257, 1024]}
_CONTEXT_BYTES = {"cpu": 64 << 20, "cuda": 4 << 30}


_TASKS: dict[tuple[str, int, int], ReferenceTask] = {}


def reference_task(name: str) -> ReferenceTask:
    """The task for a ``reference:`` name, rebuilt when the file changes."""
    spec = parse_task_name(name)
    path = spec.path
    if not path.is_file():
        raise ReferenceFileError(f"no such reference file: {path}")
    st = path.stat()
    key = (name, st.st_mtime_ns, st.st_size)
    if key not in _TASKS:
        _TASKS[key] = ReferenceTask(read_reference(path, spec), name)
    return _TASKS[key]


def _prod(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


class ReferenceTask(Task):
    family = "reference"
    unit = "GB/s"
    batch_symbol = "B"
    # KernelBench's harness compares the values of whatever tensor ``forward`` returns, strided or not.
    contiguous_outputs = False

    def __init__(self, ref: ReferenceFile, name: str):
        self.ref = ref
        self.name = name
        self.axis = ref.batch_axis
        self.arity = len(ref.inputs)
        self.sample_unit = f"one slice along axis {self.axis} of every tensor input"
        n_out = len(ref.outputs)
        self.output_names = ("out",) if not ref.returns_tuple else tuple(f"out{i}" for i in range(n_out))
        self.signature = self._signature()
        self._models: dict[tuple[str, torch.dtype], torch.nn.Module] = {}
        self.training = not ref.eval_mode

    def init_values(self) -> tuple[Any, ...]:
        return tuple(self.ref.init_inputs)

    # ---- description ------------------------------------------------------------
    def _dims(self, shape: tuple[int, ...]) -> str:
        return ",".join(self.batch_symbol if i == self.axis else str(d) for i, d in enumerate(shape))

    def _signature(self) -> str:
        parts = []
        for s in self.ref.inputs:
            if s.batched:
                parts.append(f"{s.name}[{self._dims(s.shape)}] {str(s.dtype).removeprefix('torch.')}")
            else:
                parts.append(f"{s.name}: {type(s.value).__name__}")
        pairs = zip(self.output_names, self.ref.outputs, strict=True)
        outs = ", ".join(f"{n}[{self._dims(o.shape)}]" for n, o in pairs)
        return (
            f"ModelNew.forward({', '.join(parts)}) -> {outs if len(self.output_names) == 1 else f'({outs})'}"
        )

    def describe(self) -> dict[str, Any]:
        return super().describe() | {
            "reference": str(self.ref.path),
            "batch_axis": self.axis,
            "batch": self.ref.batch,
            "mode": "training" if self.training else "eval",
            **({"shrunk": self.ref.shrunk} if self.ref.shrunk else {}),
        }

    # ---- dtypes --------------------------------------------------------------------
    def dtype_for(self, device: torch.device) -> torch.dtype:
        """fp32 on CPU (the Triton interpreter); on GPU the dtype of the reference's float inputs."""
        if device.type == "cpu":
            return torch.float32
        floats = [s.dtype for s in self.ref.inputs if s.dtype is not None and s.dtype.is_floating_point]
        return floats[0] if floats else torch.float32

    def probe_dtypes(self, device: torch.device) -> list[torch.dtype]:
        return []  # ModelNew's parameters are cast once, to the task's dtype

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return TOLERANCES.get(dtype, DEFAULT_TOLERANCES.get(dtype, TOLERANCES[torch.float32]))

    # ---- inputs -----------------------------------------------------------------------
    def _draw(self, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> list[Any]:
        """One fresh ``get_inputs()`` call (seeded from ``gen``), on ``device``, floats in ``dtype``."""
        seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())
        path = self.ref.path
        raw = seeded(lambda: call_user(self.ref.get_inputs, "get_inputs()", path), seed)
        if not isinstance(raw, (list, tuple)) or len(raw) != len(self.ref.inputs):
            raise ReferenceFileError(f"{path.name}: get_inputs() returned a different number of inputs")
        out: list[Any] = []
        for slot, value in zip(self.ref.inputs, raw, strict=True):
            if not slot.batched:
                out.append(slot.value)
                continue
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != slot.shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ReferenceFileError(
                    f"{path.name}: get_inputs() returned {slot.name} as {got} on a later call, "
                    f"{slot.shape} the first time: its shapes must not change between calls"
                )
            value = value.to(device)
            out.append(value.to(dtype) if value.is_floating_point() else value)
        return out

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        if device.type == "cuda":
            free, where = device_memory(device)
            size = torch.empty((), dtype=dtype).element_size()
            floats = sum(_prod(s.shape) * size for s in self.ref.inputs if s.batched)
            check_fits(self.ref.path, floats, self.ref.batch, free, where)
        values = {i: s.value for i, s in enumerate(self.ref.inputs) if not s.batched}
        # Slices of get_inputs() calls not handed out yet: one call makes a full batch of samples.
        return Problem(device, dtype, {"B": self.ref.batch}, {"values": values, "pool": []})

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        pool: list[Sample] = problem.shared["pool"]
        while len(pool) < n:
            drawn = self._draw(gen, problem.device, problem.dtype)
            per_input = {
                str(i): v.unbind(self.axis) for i, v in enumerate(drawn) if isinstance(v, torch.Tensor)
            }
            pool.extend(Sample({k: v[j] for k, v in per_input.items()}) for j in range(self.ref.batch))
        taken, problem.shared["pool"] = pool[:n], pool[n:]
        return taken

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        return self.samples(problem, gen, 1)[0]

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        args: list[Any] = []
        for i, slot in enumerate(self.ref.inputs):
            if slot.batched:
                args.append(torch.stack([s.tensors[str(i)] for s in samples], dim=self.axis).contiguous())
            else:
                args.append(problem.shared["values"][i])
        return tuple(args)

    def select(
        self, output: Any, index: int, args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...]:
        outs = output if isinstance(output, tuple) else (output,)
        return tuple(o.select(self.axis, index) for o in outs)

    # ---- reference and correctness ----------------------------------------------------
    def _batch_of(self, args: tuple[Any, ...]) -> tuple[int, torch.dtype]:
        tensors = [a for a, s in zip(args, self.ref.inputs, strict=True) if s.batched]
        floats = [t.dtype for t in tensors if t.is_floating_point()]
        return int(tensors[0].shape[self.axis]), floats[0] if floats else torch.float32

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        b, dtype = self._batch_of(args)
        spec = []
        for o in self.ref.outputs:
            shape = list(o.shape)
            shape[self.axis] = b
            spec.append((torch.Size(shape), dtype if o.dtype.is_floating_point else o.dtype))
        return spec

    def _model(self, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
        key = (str(device), dtype)
        if key not in self._models:
            path = self.ref.path
            model = seeded(lambda: call_user(self._construct, "Model(*get_init_inputs())", path), INIT_SEED)
            self._models[key] = model.to(device).to(dtype).train(self.training)
        return self._models[key]

    def _construct(self) -> torch.nn.Module:
        return self.ref.model_cls(*self.ref.init_inputs)

    def eager_model(self, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        """``Model`` as the user runs it: built under the task's seed, on ``device``, in ``dtype``."""
        path = self.ref.path
        model = seeded(lambda: call_user(self._construct, "Model(*get_init_inputs())", path), INIT_SEED)
        return model.to(device).to(dtype).train(self.training)

    def placement(self, args: tuple[Any, ...]) -> tuple[torch.device, torch.dtype]:
        """The device of a batch's tensors and the dtype of its float inputs (fp32 if none)."""
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        return device, self._batch_of(args)[1]

    def reference(self, *args: Any) -> Any:
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        up = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
        with torch.no_grad():
            out = call_user(lambda: self._model(device)(*up), "Model.forward", self.ref.path)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        spec = self.output_spec(args)
        cast = tuple(o.to(dt).contiguous() for o, (_, dt) in zip(outs, spec, strict=True))
        unusable = unusable_output(cast, self.output_names, args)
        if unusable:
            raise ReferenceFileError(
                f"{self.ref.path.name}: Model returns {unusable}: no candidate can be judged against it"
            )
        return cast if self.ref.returns_tuple else cast[0]

    def reference_exact(self, *args: Any) -> tuple[torch.Tensor, ...]:
        """``Model`` in float64 on the inputs upcast to float64 (in the mode it is judged in)."""
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        up = tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
        with torch.no_grad():
            out = call_user(lambda: self._model(device, torch.float64)(*up), "Model.forward", self.ref.path)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def correctness_batches(self, device: torch.device) -> list[int]:
        b = self.ref.batch
        return sorted({1, min(5 if device.type == "cpu" else 7, b), b})

    # ---- the candidate's entry point ------------------------------------------------
    def bind_entry(
        self, entry: Any, name: str, path: Path, device: torch.device, dtype: torch.dtype
    ) -> Callable[..., Any] | None:
        """``ModelNew(*get_init_inputs())`` with ``Model``'s matching weights, as a function of the inputs."""
        from nodice.loader import check_arity

        if not (isinstance(entry, type) and issubclass(entry, torch.nn.Module)):
            raise EntryPointError(f"'{name}' in {path.name} is not a torch.nn.Module class")
        ref_state = self._model(torch.device("cpu")).state_dict()

        def build() -> torch.nn.Module:
            module = entry(*self.ref.init_inputs)
            state = module.state_dict()
            shared = {k: v for k, v in ref_state.items() if k in state and state[k].shape == v.shape}
            module.load_state_dict(shared, strict=False)
            module = module.to(device)
            return (module.to(dtype) if dtype.is_floating_point else module).train(self.training)

        what = f"{name}(*get_init_inputs())"
        module = seeded(lambda: call_user(build, what, path, EntryPointError), INIT_SEED)
        check_arity(module.forward, f"{name}.forward", self.arity)

        @functools.wraps(module.forward)
        def run(*args: Any) -> Any:
            with torch.no_grad():
                return module(*args)

        return run

    # ---- batch invariance ---------------------------------------------------------------
    def sample_bytes(self, dtype: torch.dtype) -> int:
        elt = torch.empty((), dtype=dtype).element_size()
        total = 0
        for s in self.ref.inputs:
            if s.batched and s.dtype is not None:
                size = elt if s.dtype.is_floating_point else s.dtype.itemsize
                total += _prod(s.shape) // self.ref.batch * size
        return max(total, 1)

    def sample_elements(self) -> list[int]:
        return sorted({_prod(s.shape) // self.ref.batch for s in self.ref.inputs if s.batched})

    def context_sizes(self, device: torch.device) -> list[int]:
        """Batch sizes around the usual heuristics, the reference's own, and (on GPU) twice it."""
        kind = "cpu" if device.type == "cpu" else "cuda"
        b = self.ref.batch
        fits = _CONTEXT_BYTES[kind] // self.sample_bytes(self.dtype_for(device))
        sizes = {s for s in _SIZES[kind] if s <= fits}
        sizes.add(b)
        if kind == "cuda" and 2 * b <= fits:
            sizes.add(2 * b)
        return sorted(s for s in sizes if s >= 2)

    def contexts(self, device: torch.device) -> list[BIContext]:
        out: list[BIContext] = []
        for b in self.context_sizes(device):
            for pos, label in ((0, "first"), (b // 2, "middle"), (-1, "last")):
                out.append(BIContext(f"batch={b},{label}", b, pos))
        return out

    def threshold_contexts(self, device: torch.device, sizes: list[int]) -> list[BIContext]:
        """The first and last positions at each size the usual contexts lack, within four times the
        usual memory for one batch."""
        kind = "cpu" if device.type == "cpu" else "cuda"
        fits = 4 * _CONTEXT_BYTES[kind] // self.sample_bytes(self.dtype_for(device))
        have = set(self.context_sizes(device))
        return [
            BIContext(f"batch={b},{label},threshold", b, pos)
            for b in sizes
            if b not in have and 2 <= b <= fits
            for pos, label in ((0, "first"), (-1, "last"))
        ]

    # ---- performance ----------------------------------------------------------------------
    def workloads(self) -> list[Workload]:
        shapes = {s.name: list(s.shape) for s in self.ref.inputs if s.batched}
        return [Workload("reference", {"B": self.ref.batch, **shapes}, self.ref.path.name)]

    def small_workloads(self) -> list[Workload]:
        return self.workloads()

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        return tuple(self._draw(gen, device, dtype))

    def flops(self, workload: Workload) -> float:
        return 0.0  # unknown for an arbitrary Model: reference tasks score in GB/s

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """Inputs, outputs and Model's parameters and buffers, each read or written once."""
        elt = torch.empty((), dtype=dtype).element_size()

        def size(shape: tuple[int, ...], dt: torch.dtype) -> int:
            return _prod(shape) * (elt if dt.is_floating_point else dt.itemsize)

        total = sum(size(s.shape, s.dtype) for s in self.ref.inputs if s.batched and s.dtype is not None)
        total += sum(size(o.shape, o.dtype) for o in self.ref.outputs)
        state = self._model(torch.device("cpu")).state_dict()
        total += sum(size(tuple(t.shape), t.dtype) for t in state.values())
        return float(total)
