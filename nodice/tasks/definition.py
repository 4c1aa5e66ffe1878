"""A task built from a FlashInfer-Bench Definition: a catalog task speaking the definition's interface.

A definition (``rmsnorm_h4096``, ``gemm_n4096_k4096`` …) names its operation by
``op_type``; nodice maps that to a catalog task, which makes the samples, the
batches and the contexts. An :class:`Adapter` turns the task's arguments into
the definition's named inputs and the definition's outputs back into the task's
output, so the gate runs the Solution's entry point exactly as FlashInfer-Bench
calls it (inputs in the definition's order, then the outputs to write when the
solution uses destination-passing style). Correctness is judged against the
definition's own ``reference`` code, the const axes (hidden size, N, K) are
pinned to the definition's values, and static analysis reads the entry with the
definition's signature and batch axis.

The task travels between processes by name: ``flashinfer:/abs/DEF.json``, with
``#returns`` appended for a solution that returns its outputs.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.errors import DefinitionError, EntryPointError
from nodice.tasks._attention import draw_sm_scale
from nodice.tasks.base import BIContext, Output, Problem, Task, Workload, randn
from nodice.tasks.definition_adapters import ADAPTERS, Adapter, adapter_for

PREFIX = "flashinfer:"
_RETURNS_TAG = "#returns"

__all__ = ["ADAPTERS", "Adapter", "adapter_for", "definition_task", "definition_task_name", "load_definition"]


def _linear_weight(
    k: int, n: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """gemm's b[K, N] as the transposed view of a contiguous [N, K] weight (the definition's B)."""
    return randn((n, k), gen, device, dtype, scale=1.0 / math.sqrt(k)).t()


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
    except ImportError:
        raise error(
            "reading FlashInfer-Bench files needs flashinfer-bench: pip install 'nodice[flashinfer-bench]'"
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


class _DefinitionTask:
    """Mixed in before a catalog task's class: the definition's interface over that task's batches."""

    output_names: tuple[str, ...]  # the catalog task's (annotation only: its class attribute stays in force)

    def __init__(self, name: str, path: Path, definition: Any, adapter: Adapter, returns: bool) -> None:
        self.name = name
        self.definition = definition
        self.adapter = adapter
        self.destination_passing = not returns
        self.path = path
        self.signature = _signature(definition, self.destination_passing)
        self.batch_symbol = adapter.batch_axis
        self.contracts_of = adapter.task
        self.pinned = {dim: int(definition.const_axes[axis]) for dim, axis in adapter.const_dims.items()}
        if adapter.judges_lse:
            self.output_names = (*self.output_names, "lse")

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
        namespace: dict[str, Any] = {"__name__": f"flashinfer_definition_{self.definition.name}"}
        try:
            exec(compile(self.definition.reference, f"<{self.definition.name}.reference>", "exec"), namespace)
        except Exception as exc:
            raise DefinitionError(
                f"definition {self.definition.name}: its reference fails to load: {exc}"
            ) from None
        fn: Callable[..., Any] = namespace["run"]
        return fn

    def _definition_inputs(self, args: tuple[Any, ...]) -> list[Any]:
        named = self.adapter.to_definition(args)
        return [named[n] for n in self.adapter.inputs]

    def reference(self, *args: Any) -> Output:
        return self.adapter.from_definition(
            self._as_outputs(self._reference_run(*self._definition_inputs(args))), args
        )

    def _as_outputs(self, out: Any) -> tuple[Any, ...]:
        """A returned value as the definition's outputs in order (tuple, list, dict by name, one tensor)."""
        if isinstance(out, dict):
            return tuple(out[n] for n in self.adapter.outputs if n in out)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    # ---- the solution's entry point --------------------------------------------------------
    def bind_entry(
        self, entry: Any, name: str, path: Path, device: torch.device, dtype: torch.dtype
    ) -> Callable[..., Any] | None:
        if not callable(entry):
            raise EntryPointError(f"'{name}' in {path.name} is not callable")
        wanted = len(self.adapter.inputs) + (len(self.adapter.outputs) if self.destination_passing else 0)
        try:
            params = list(inspect.signature(entry).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if params and not any(p.kind is p.VAR_POSITIONAL for p in params) and len(positional) != wanted:
            style = "inputs then outputs (destination-passing)" if self.destination_passing else "inputs"
            raise EntryPointError(
                f"'{name}' takes {len(positional)} positional arguments; the definition "
                f"{self.definition.name} passes {wanted}: {style}"
            )
        definition, adapter = self.definition, self.adapter
        from flashinfer_bench.utils import dtype_str_to_torch_dtype

        # The definition's io dtype: its first floating tensor input's.
        io_spec = next(
            (s.dtype.value for s in definition.inputs.values() if s.shape and "float" in s.dtype.value), ""
        )

        def run(*args: Any) -> Output:
            inputs = self._definition_inputs(args)
            if not self.destination_passing:
                return adapter.from_definition(self._as_outputs(entry(*inputs)), args)
            axes = definition.get_axes_values_from_inputs(inputs)
            io_dtype = next(
                (t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()), dtype
            )
            outs = []
            for shape, spec in zip(
                definition.get_output_shapes(axes), definition.outputs.values(), strict=True
            ):
                # Outputs in the io dtype follow the gate's (fp32 on CPU); others (an fp32 lse) keep theirs.
                out_dtype = (
                    io_dtype if spec.dtype.value == io_spec else dtype_str_to_torch_dtype(spec.dtype.value)
                )
                outs.append(torch.empty(shape or (), device=inputs[0].device, dtype=out_dtype))
            entry(*inputs, *outs)
            return adapter.from_definition(tuple(outs), args)

        return run

    # ---- sizes: the definition's const axes ---------------------------------------------------
    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        if self.adapter.task == "gemm":
            k, n = self.pinned["K"], self.pinned["N"]
            return Problem(device, dtype, {"K": k, "N": n}, {"b": _linear_weight(k, n, gen, device, dtype)})
        if self.adapter.task == "attention_decode":
            p = self.pinned
            lengths = variant.get("lengths") or ((17, 64) if device.type == "cpu" else (200, 3000))
            dims = {"layout": self.definition.name, **p, "lengths": tuple(lengths)}
            return Problem(device, dtype, dims, {"sm_scale": draw_sm_scale(gen, p["D"])})
        if self.adapter.task == "mla_decode":
            p = self.pinned
            lengths = variant.get("lengths")
            return super().problem(gen, device, dtype, heads=p["H"], page=p["page"], lengths=lengths)  # type: ignore[misc,call-arg]
        if self.adapter.task == "dsa":
            p = self.pinned
            fixed = {"heads": p["H"], "page": p["page"], "topk": p["topk"]}
            problem: Problem = super().problem(gen, device, dtype, **{**variant, **fixed})  # type: ignore[misc]
            problem.dims.update(d_v=p["d_v"], d_rope=p["d_rope"])
            return problem
        return super().problem(gen, device, dtype, **self.pinned)  # type: ignore[misc,call-arg]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        if self.adapter.task == "gemm":
            m, k, n = (workload.params[d] for d in ("M", "K", "N"))
            return (randn((m, k), gen, device, dtype), _linear_weight(k, n, gen, device, dtype))
        base: tuple[Any, ...] = super().workload_inputs(workload, gen, device, dtype)  # type: ignore[misc]
        return base

    def contexts(self, device: torch.device) -> list[BIContext]:
        """The catalog task's contexts with the definition's sizes: what a variant fixes is dropped from it.

        A context left with the batch, slot and knobs of one already listed (the norms' narrow-row sweep at
        a batch size the plain contexts have) is dropped too.
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
            key = repr((c.batch_size, c.resolved_position(), sorted(params.items())))
            if key in seen:
                continue
            seen.add(key)
            knobs = "".join(f",{k}={v}" for k, v in sorted(params.items()) if k != "variant")
            knobs += "".join(f",{k}={v}" for k, v in sorted(variant.items()))
            name = f"batch={c.batch_size},slot={c.resolved_position()}{knobs}"
            out.append(BIContext(name, c.batch_size, c.position, params))
        return out

    def _pin(self, workloads: list[Workload]) -> list[Workload]:
        seen, out = set(), []
        for w in workloads:
            params = {**w.params, **self.pinned}
            if self.adapter.derived_params is not None:
                params.update(self.adapter.derived_params(params))
            key = tuple(sorted(params.items()))
            if key not in seen:
                seen.add(key)
                out.append(Workload(w.name, params, w.model))
        return out

    def workloads(self) -> list[Workload]:
        return self._pin(super().workloads())  # type: ignore[misc]

    def small_workloads(self) -> list[Workload]:
        return self._pin(super().small_workloads())  # type: ignore[misc]


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
