"""A task built from a FlashInfer-Bench Definition: a catalog task speaking the definition's interface.

A definition (``rmsnorm_h4096``, ``gemm_n4096_k4096`` …) names its operation by
``op_type``; its inputs pick one of that op_type's adapters
(:mod:`nodice.tasks.definition_adapters`), which names the catalog task that makes the
samples, the batches and the contexts. The :class:`Adapter` turns the task's arguments into
the definition's named inputs and the definition's outputs back into the task's output, so
the gate runs the Solution's entry point exactly as FlashInfer-Bench calls it (inputs in the
definition's order, then the outputs to write when the solution uses destination-passing
style). Correctness is judged against the definition's own ``reference`` code, the const axes
(hidden size, N, K …) are pinned to the definition's values, static analysis reads the entry
with the definition's signature and batch axis, and every message names the definition's
inputs and outputs.

The task travels between processes by name: ``flashinfer:/abs/DEF.json``, with
``#returns`` appended for a solution that returns its outputs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.errors import DefinitionError, EntryPointError
from nodice.tasks.base import BIContext, Output, Problem, Task, Tolerance, Workload, signature_names
from nodice.tasks.definition_adapters import ADAPTERS, Adapter, adapter_for
from nodice.tasks.definition_reference import as_outputs, compile_reference, reference_file, run_reference
from nodice.tasks.definition_sizes import (
    definition_problem,
    definition_workload_inputs,
    input_sizes,
    pin_workloads,
    refuse_unless_fits,
)
from nodice.tasks.reference_file import device_memory

PREFIX = "flashinfer:"
_RETURNS_TAG = "#returns"

__all__ = ["ADAPTERS", "Adapter", "adapter_for", "definition_task", "definition_task_name", "load_definition"]

# Floating dtypes from the finest to the coarsest: the tolerance follows the coarsest a reference rounds to.
_PRECISION = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def definition_task_name(path: str | Path, returns: bool = False) -> str:
    return f"{PREFIX}{Path(path).resolve()}" + (_RETURNS_TAG if returns else "")


def parse_task_name(name: str) -> tuple[Path, bool]:
    body = name.removeprefix(PREFIX)
    returns = body.endswith(_RETURNS_TAG)
    return Path(body.removesuffix(_RETURNS_TAG)), returns


def load_model(kind: str, path: str | Path, error: type[DefinitionError] = DefinitionError) -> Any:
    """The file as FlashInfer-Bench's own ``kind`` model (``Definition``, ``Solution``), else ``error``."""
    try:
        from flashinfer_bench import data
    except ImportError as exc:
        missing = "" if exc.name == "flashinfer_bench" else f" ({exc.name or exc} is missing)"
        raise error(
            f"reading FlashInfer-Bench files needs flashinfer-bench{missing}: "
            "pip install 'nodice[flashinfer-bench]'"
        ) from None
    from pydantic import ValidationError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}") from None
    try:
        return getattr(data, kind).model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise error(f"{Path(path).name} is not a FlashInfer-Bench {kind}: {where}: {first['msg']}") from None


def load_definition(path: str | Path) -> Any:
    return load_model("Definition", path)


def _signature(definition: Any, destination_passing: bool) -> str:
    def arg(name: str, spec: Any) -> str:
        return (
            f"{name}[{','.join(spec.shape)}] {spec.dtype.value}"
            if spec.shape
            else f"{name}: {spec.dtype.value}"
        )

    params = [arg(n, s) for n, s in definition.inputs.items()]
    outs = [arg(n, s) for n, s in definition.outputs.items()]
    if destination_passing:
        return f"run({', '.join(params + outs)}) -> None"
    return f"run({', '.join(params)}) -> ({', '.join(outs)})"


def _torch_dtype(name: str) -> torch.dtype:
    from flashinfer_bench.utils import dtype_str_to_torch_dtype

    dtype: torch.dtype = dtype_str_to_torch_dtype(name)
    return dtype


def _gate_dtype(args: tuple[Any, ...]) -> torch.dtype:
    """The dtype the gate runs in: its first floating-point tensor argument's."""
    return next(
        (a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32
    )


class _DefinitionTask:
    """Mixed in before a catalog task's class: the definition's interface over that task's batches."""

    output_names: tuple[str, ...]

    def __init__(self, name: str, path: Path, definition: Any, adapter: Adapter, returns: bool) -> None:
        self.name = name
        self.definition = definition
        self.adapter = adapter
        self.destination_passing = not returns
        self.path = path
        self.signature = _signature(definition, self.destination_passing)
        self.batch_symbol = adapter.batch_axis
        self.contracts_of = adapter.task
        self.consts = {k: int(v) for k, v in definition.const_axes.items()}
        if adapter.shared_rng:  # every sampler of a seedless interface continues one stream
            self.inherent_rules = frozenset({"rng_stream_shared_by_batch"})
        self.pinned = {dim: self.consts[axis] for dim, axis in adapter.const_dims.items()}
        # Every message names the definition's outputs: its own, then any the adapter supplies.
        missing = len(adapter.outputs) - len(definition.outputs)
        supplied = adapter.supplied_outputs[len(adapter.supplied_outputs) - missing :] if missing else ()
        self.output_names = (*definition.outputs, *supplied)
        # The io dtype: the definition's first floating tensor input's. Inputs and outputs declared in it
        # follow the gate's dtype (fp32 on CPU); the others (fp32 probabilities, an fp32 lse) keep theirs.
        self.io_spec = next(
            (s.dtype.value for s in definition.inputs.values() if s.shape and "float" in s.dtype.value), ""
        )
        # The coarsest floating dtype the definition's reference has returned (a bf16 output on CPU).
        self._reference_floor: torch.dtype | None = None
        # The devices and workloads whose inputs were found to fit (each is checked once).
        self._fits: set[str] = set()

    # ---- dtypes --------------------------------------------------------------------------------
    def dtype_for(self, device: torch.device) -> torch.dtype:
        """The definition's io dtype on GPU (fp16 for FlashInfer-Bench's GEMMs); fp32 on CPU, where
        Triton's interpreter does not compute bf16."""
        base: torch.dtype = super().dtype_for(device)  # type: ignore[misc]
        if device.type != "cuda" or self.io_spec not in ("float16", "bfloat16", "float32"):
            return base
        return _torch_dtype(self.io_spec)

    def cpu_note(self, dtype: torch.dtype) -> str | None:
        """Why a solution may fail on CPU: it is fed ``dtype``, not the definition's io dtype."""
        declared = self.io_spec
        if dtype == torch.float32 and declared in ("float16", "bfloat16"):
            return (
                f"on CPU nodice runs definitions in float32 (Triton's interpreter does not compute "
                f"bfloat16; {self.definition.name} declares {declared}); run with --device cuda to judge "
                f"in {declared}"
            )
        return None

    def _coarsest(self, *dtypes: torch.dtype | None) -> torch.dtype | None:
        known = [d for d in dtypes if d in _PRECISION]
        return max(known, key=_PRECISION.index) if known else None

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        """The catalog task's tolerance for the coarsest dtype in play: the gate's, or the one the
        definition's reference rounds its outputs to (FlashInfer-Bench's references return bf16)."""
        floor = self._coarsest(dtype, self._reference_floor) or dtype
        tol: Tolerance = super().tolerance(floor)  # type: ignore[misc]
        return tol

    def precision_floor(self, dtype: torch.dtype) -> torch.dtype:
        """Below the reference's own precision a downgrade cannot be told from it: its output rounding,
        or inputs the definition quantizes (fp8)."""
        quantized = [
            _torch_dtype(s.dtype.value) for s in self.definition.inputs.values() if "float8" in s.dtype.value
        ]
        if quantized:
            return quantized[0]
        return self._coarsest(dtype, self._reference_floor) or dtype

    # ---- messages in the definition's words ---------------------------------------------------------
    def input_label(self, index: int) -> str:
        names = self.adapter.argument_names
        name = names[index] if index < len(names) else None
        return f"input {name}" if name else f"input argument {index}"

    def argument_names(self) -> list[str]:
        """The task's arguments by the definition's inputs they are, else by the catalog task's names."""
        # The catalog class's signature: this instance's is the definition's.
        own = signature_names(str(getattr(type(self), "signature", "")))
        names = self.adapter.argument_names
        return [name or n for name, n in zip([*names, *[None] * len(own)], own, strict=False)]

    def filter_words(self, temperature: float, top_k: int, top_p: float) -> str:
        """A sampling request as the definition sees it: its probabilities and the filters it takes."""
        words = ["one-hot probs" if temperature <= 0 else f"probs at temperature {temperature:.3g}"]
        words += [f"top_k={top_k}"] if "top_k" in self.definition.inputs else []
        words += [f"top_p={top_p:.3g}"] if "top_p" in self.definition.inputs else []
        return ", ".join(words)

    def request_words(
        self, i: int, temperature: float, top_k: int, top_p: float, token: int
    ) -> tuple[str, str]:
        return (
            f"probs[{i}] ({self.filter_words(temperature, top_k, top_p)})",
            f"{self.output_names[0]}[{i}] = {token}",
        )

    def parameters(self, temperature: float, top_k: int, top_p: float) -> tuple[float, int, float]:
        """A filter the definition does not take filters nothing."""
        inputs = self.definition.inputs
        return temperature, top_k if "top_k" in inputs else 0, top_p if "top_p" in inputs else 1.0

    # ---- lse: a second output, [rows, heads] fp32, selected as the task selects its rows -------------
    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        spec: list[tuple[torch.Size, torch.dtype]] = super().output_spec(args)  # type: ignore[misc]
        if self.adapter.judges_lse:
            spec = [*spec, (torch.Size(spec[0][0][:2]), torch.float32)]
        return spec

    def select(
        self, output: Output, index: int, args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...]:
        pick = super().select  # type: ignore[misc]
        if not self.adapter.judges_lse or not isinstance(output, tuple):
            return pick(output, index, args)  # type: ignore[no-any-return]
        return (*pick(output[0], index, args), *pick(output[1], index, args))

    def select_many(
        self, output: Output, indices: list[int], args: tuple[Any, ...] | None = None
    ) -> list[tuple[torch.Tensor, ...]]:
        pick = super().select_many  # type: ignore[misc]
        if not self.adapter.judges_lse or not isinstance(output, tuple):
            return pick(output, indices, args)  # type: ignore[no-any-return]
        return [
            (*o, *lse)
            for o, lse in zip(pick(output[0], indices, args), pick(output[1], indices, args), strict=True)
        ]

    # ---- the definition's reference ------------------------------------------------------
    @functools.cached_property
    def _reference_run(self) -> Callable[..., Any]:
        return compile_reference(self.definition)

    def _definition_inputs(self, args: tuple[Any, ...]) -> list[Any]:
        """The task's arguments as the definition's inputs, in its order and declared dtypes."""
        named = self.adapter.to_definition(args, self.consts)
        gate = _gate_dtype(args)
        out = []
        for name, spec in self.definition.inputs.items():
            value = named[name]
            if isinstance(value, torch.Tensor):
                declared = spec.dtype.value
                want = gate if declared == self.io_spec else _torch_dtype(declared)
                if value.dtype != want:
                    value = value.to(want)
            out.append(value)
        return out

    def _supplied(self, args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        """The task's outputs the definition leaves out, made by the adapter from ``args``."""
        missing = len(self.adapter.outputs) - len(self.definition.outputs)
        if not missing or self.adapter.supply is None:
            return ()
        return self.adapter.supply(args)[-missing:]

    def reference(self, *args: Any) -> Output:
        """The definition's reference on the task's arguments, as the task's output; what is wrong with the
        reference is the definition's :class:`DefinitionError` (:mod:`nodice.tasks.definition_reference`)."""
        outs = run_reference(self.definition, self._reference_run, self._definition_inputs(args), args)
        floats = [o.dtype for o in outs if o.is_floating_point()]
        self._reference_floor = self._coarsest(self._reference_floor, *floats)
        return self.adapter.from_definition((*outs, *self._supplied(args)), args)

    def _as_outputs(self, out: Any) -> tuple[Any, ...]:
        return as_outputs(self.definition, out)

    # ---- batch applicability (nodice.gate.applicability) ------------------------------------
    @property
    def reference_name(self) -> str:
        return f"definition {self.definition.name}'s reference"

    def reference_outputs(self, *args: Any) -> tuple[torch.Tensor, ...]:
        """The reference on a batch, one tensor per output of the task: what the applicability check
        compares, alone and in batches."""
        out = self.reference(*args)
        return out if isinstance(out, tuple) else (out,)

    def reference_code(self) -> tuple[str, str, int | None]:
        """The reference's source, the file name it runs under, and where the batch axis sits in the
        shape of the first input that has it (None: none has)."""
        axis = self.adapter.batch_axis
        shapes = [list(s.shape) for s in self.definition.inputs.values() if s.shape and axis in s.shape]
        where = shapes[0].index(axis) if shapes else None
        return self.definition.reference, reference_file(self.definition), where

    # ---- the solution's entry point --------------------------------------------------------
    def bind_entry(
        self, entry: Any, name: str, path: Path, device: torch.device, dtype: torch.dtype
    ) -> Callable[..., Any] | None:
        if not callable(entry):
            raise EntryPointError(f"'{name}' in {path.name} is not callable")
        definition, adapter = self.definition, self.adapter
        wanted = len(definition.inputs) + (len(definition.outputs) if self.destination_passing else 0)
        try:
            params = list(inspect.signature(entry).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if params and not any(p.kind is p.VAR_POSITIONAL for p in params) and len(positional) != wanted:
            style = "inputs then outputs (destination-passing)" if self.destination_passing else "inputs"
            raise EntryPointError(
                f"'{name}' takes {len(positional)} positional arguments; the definition "
                f"{definition.name} passes {wanted}: {style}"
            )

        def call(*values: Any) -> Any:
            try:
                return entry(*values)
            except Exception as exc:
                note = self.cpu_note(_gate_dtype(values)) if device.type == "cpu" else None
                if note:
                    exc.add_note(note)
                raise

        def run(*args: Any) -> Output:
            inputs = self._definition_inputs(args)
            supplied = self._supplied(args)  # before the solution runs: it may write into its inputs
            if not self.destination_passing:
                return adapter.from_definition((*self._as_outputs(call(*inputs)), *supplied), args)
            axes = definition.get_axes_values_from_inputs(inputs)
            gate = _gate_dtype(args)
            outs = []
            for shape, spec in zip(
                definition.get_output_shapes(axes), definition.outputs.values(), strict=True
            ):
                declared = spec.dtype.value
                out_dtype = gate if declared == self.io_spec else _torch_dtype(declared)
                outs.append(torch.empty(shape or (), device=inputs[0].device, dtype=out_dtype))
            call(*inputs, *outs)
            return adapter.from_definition((*outs, *supplied), args)

        return run

    # ---- memory: the definition's sizes against the device's, before anything is drawn ---------------
    def check_fits(self, device: torch.device) -> None:
        """Refuse (:class:`DefinitionError`, one line) a definition whose largest batch on ``device`` the
        gate cannot hold: its inputs' bytes by arithmetic on the definition's axes, the batch axis at the
        largest batch of the gate's correctness and invariance checks there. Every draw (:meth:`problem`)
        checks first; the worker checks before any stage runs."""
        key = str(device)
        if key in self._fits:
            return
        batches: list[int] = self.correctness_batches(device)  # type: ignore[attr-defined]
        batch = max([c.batch_size for c in self.contexts(device)] + batches)
        self._refuse_unless_fits(
            device, {self.adapter.batch_axis: batch}, f"the largest batch the gate draws on {device.type}"
        )
        self._fits.add(key)

    def _check_workload_fits(self, workload: Workload, device: torch.device) -> None:
        """As :meth:`check_fits`, for one benchmark workload: its variable axes are the workload's."""
        key = f"{device}/{workload.name}/{sorted(workload.params.items())!r}"
        if key in self._fits:
            return
        var_dims = self.adapter.var_dims
        axes = {var_dims[k]: int(v) for k, v in workload.params.items() if k in var_dims}
        self._refuse_unless_fits(device, axes, f"workload {workload.name} on {device.type}")
        self._fits.add(key)

    def _refuse_unless_fits(self, device: torch.device, var_values: dict[str, int], batch: str) -> None:
        gate = self.dtype_for(device)

        def held_in(declared: str) -> torch.dtype:  # as _definition_inputs converts them
            return gate if declared == self.io_spec else _torch_dtype(declared)

        sizes = input_sizes(self.definition, var_values, held_in)
        available, where = device_memory(device)
        refuse_unless_fits(self.definition.name, sizes, batch, available, where)

    # ---- sizes and contexts: the definition's const axes -------------------------------------------
    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        self.check_fits(device)
        catalog = super().problem  # type: ignore[misc]
        return definition_problem(
            self.adapter.task, catalog, self.pinned, self.definition.name, gen, device, dtype, variant
        )

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        self._check_workload_fits(workload, device)
        catalog = super().workload_inputs  # type: ignore[misc]
        return definition_workload_inputs(self.adapter.task, catalog, workload, gen, device, dtype)

    def contexts(self, device: torch.device) -> list[BIContext]:
        """The catalog task's contexts with the definition's sizes: what a variant fixes is dropped from it.

        A context left with the batch, slot and knobs of one already listed (the norms' narrow-row sweep at
        a batch size the plain contexts have) is dropped too. A definition that draws from torch's global
        generator is judged with the target first in every batch (:mod:`nodice.tasks.definition_sampling`).
        """
        base: list[BIContext] = super().contexts(device)  # type: ignore[misc]
        out: list[BIContext] = []
        seen: set[str] = set()
        for c in base:
            params = dict(c.params)
            variant = {
                k: v for k, v in params.pop("variant", {}).items() if k not in self.adapter.fixed_variant_keys
            }
            if variant:
                params["variant"] = variant
            position = 0 if self.adapter.shared_rng else c.position
            slot = position % c.batch_size
            key = repr((c.batch_size, slot, sorted(params.items())))
            if key in seen:
                continue
            seen.add(key)
            knobs = "".join(f",{k}={v}" for k, v in sorted(params.items()) if k != "variant")
            knobs += "".join(f",{k}={v}" for k, v in sorted(variant.items()))
            out.append(BIContext(f"batch={c.batch_size},slot={slot}{knobs}", c.batch_size, position, params))
        return out

    def witnesses(self, device: torch.device) -> int:
        """None where a request's random numbers follow its position (a seedless sampler): only the
        target, first in its batch, has the same ones in every batch."""
        if self.adapter.shared_rng:
            return 0
        count: int = super().witnesses(device)  # type: ignore[misc]
        return count

    def workloads(self) -> list[Workload]:
        return pin_workloads(super().workloads(), self.pinned, self.adapter)  # type: ignore[misc]

    def small_workloads(self) -> list[Workload]:
        return pin_workloads(super().small_workloads(), self.pinned, self.adapter)  # type: ignore[misc]


def definition_task(name: str) -> Task:
    """The task of a ``flashinfer:`` name: the catalog task of the definition's op_type in its interface."""
    from nodice.tasks import get_task

    path, returns = parse_task_name(name)
    definition = load_definition(path)
    adapter = adapter_for(definition)
    base = get_task(adapter.task)
    cls = type(f"Definition_{type(base).__name__}", (_DefinitionTask, type(base)), {})
    task: Task = cls(name, path, definition, adapter, returns)
    return task
