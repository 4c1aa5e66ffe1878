"""Triton launches ``kernel[grid](...)``: where batch-dependent values meet a kernel's sinks.

The kernel's summary (``triton_kernels``) says which parameters and grid axes
shape a reduction or key a random draw; the launch supplies the values. A
batch-derived grid axis is harmless unless the kernel uses that axis to split a
reduction or to key random numbers.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nodice.gate.static.branches import ASSIGNED_UNDER_BRANCH, RETURNED_UNDER_BRANCH, launch_branch
from nodice.gate.static.triton_summary import KernelInfo, KernelSink
from nodice.gate.static.values import NO_CONST, V

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, KernelRef, ModuleInfo

OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "grid", "warmup", "stream"}


# Protected parameters that shape a reduction (split counts, chunk sizes), as opposed to seeds and
# routing: exact reductions are what they cannot change.
SHAPING = ("work_partitioning", "reduction_order")

# Trace steps of a value the batch picks among alternatives rather than computes.
CHOICE_MARKS = ("batch-dependent choice", ASSIGNED_UNDER_BRANCH, RETURNED_UNDER_BRANCH)


def _shapes_exact_only(info: KernelInfo, p: str) -> bool:
    """Whether a split count or tile ``p`` cannot change the bits ``info``'s kernel computes: every
    reduction it reaches (its tile, its loop range, the masks of its terms) is exact (max/min,
    argmax/argmin, an integer sum, bitwise and/or/xor), and nothing else of the kernel's sees it
    (stored values, random draws, a choice of reduction). Where it reaches no reduction at all, the
    kernel must have none whose bits depend on the order of its terms."""
    sinks = info.param_sinks(p)
    if any(s.kind != "exact_reduction" for s in sinks):
        return False
    return bool(sinks) or not info.reduces_in_order


class LaunchMixin:
    an: Analysis
    mod: ModuleInfo
    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

    def launch(self, fv: V, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        base, grid_node = fv.ref
        kernels = [k for k in (base.items or []) if k.kind == "kernel"] if base.kind == "choice" else [base]
        if base.taint is not None and len({id(k.ref.node) for k in kernels}) > 1:
            names = ", ".join(sorted({k.ref.name for k in kernels}))
            self.an.report(
                "algorithm_selection_by_batch",
                self.mod,
                node,
                "ALGORITHM",
                f"a batch-dependent value chooses which kernel is launched ({names})",
                base.taint,
                self.step(node, "launches the chosen kernel"),
            )
        for k in kernels:
            if k.kind == "kernel":
                grid = self.grid_items(grid_node, k.ref, args, kwargs, node)
                self.launch_one(k.ref, grid, args, kwargs, node)
        return V()

    def grid_items(
        self, grid_node: ast.expr, kref: KernelRef, args: list[V], kwargs: dict[str, V], node: ast.Call
    ) -> list[V] | None:
        g = self.expr(grid_node)
        if g.kind == "func":
            params = self.an.kernel_info(kref).params
            meta = dict(zip(params, args, strict=False)) | kwargs
            g = self.call_function(g.ref, [V(kind="dict", keys=dict(meta))], {}, node)  # type: ignore[attr-defined]
        if g.kind in ("seq", "shape") and g.items is not None:
            return [item.with_taint(g.taint) for item in g.items]
        if g.kind == "choice" or g.items is None:
            return None if g.taint is None else [g]
        return None

    def _exact_step(self, kref: KernelRef, info: KernelInfo, p: str) -> str:
        exact = [s for s in info.param_sinks(p) if s.kind == "exact_reduction"]
        if exact:
            return self._kernel_step(kref, exact[0], f"{p} shapes this exact reduction")
        return self._kernel_step(
            kref,
            KernelSink("kernel", frozenset(), info.node.lineno, ""),
            f"{info.name} has no reduction whose bits depend on the order of its terms",
        )

    def _chosen_elementwise(self, info: KernelInfo, p: str, v: V) -> bool:
        """Whether ``p`` picks one of a few settings of an elementwise computation: it reaches the
        kernel's stored values only (no reduction, bound, tile or draw sees it), none of them a
        reduction, and it is a compile-time constant (a specialisation of the kernel) or a runtime
        scalar chosen by a batch-dependent condition (``a if B >= 16 else b``), not a number computed
        from the batch (``1 / B``)."""
        sinks = info.param_sinks(p)
        if not sinks or any(s.kind != "output" for s in sinks):
            return False
        return p in info.constexprs or any(
            any(mark in step for mark in CHOICE_MARKS) for step in (v.taint or ())
        )

    def _kernel_step(self, kref: KernelRef, s: KernelSink, note: str) -> str:
        mod = kref.module
        text = mod.lines[s.line - 1].strip() if 0 < s.line <= len(mod.lines) else s.text
        where = f"line {s.line}" if mod.is_candidate else f"{mod.display} line {s.line}"
        return f"{where}: {text}  ({note})"

    def launch_one(
        self, kref: KernelRef, grid: list[V] | None, args: list[V], kwargs: dict[str, V], node: ast.Call
    ) -> None:
        info = self.an.kernel_info(kref)
        contract = self.an.contract
        bound: dict[str, V] = dict(zip(info.params, args, strict=False))
        bound.update({k: v for k, v in kwargs.items() if k in info.params})
        # Constexpr flags passed as literals pick what this launch compiles.
        consts = {
            p: v.const
            for p, v in bound.items()
            if p in info.constexprs and v.taint is None and v.const is not NO_CONST
        }
        if consts:
            info = self.an.kernel_info(kref, consts)
        name = info.name
        rng_params = info.rng_params
        for p, v in bound.items():
            if v.taint is None:
                continue
            at = self.step(node, f"passed as {p} to {name}")
            self.precision_sink(p, v, name, node)  # type: ignore[attr-defined]
            prot = contract.protected_for(p, rng_context=p in rng_params)
            named_tile = p in info.constexprs and contract.is_reduction_tile(p)
            # A split count or tile judged by its name: what it reaches in the kernel decides first.
            shaping = named_tile or (prot is not None and prot.mechanism in SHAPING)
            if shaping and _shapes_exact_only(info, p):
                self.an.report(
                    "exact_reduction_from_batch",
                    self.mod,
                    node,
                    prot.name if prot is not None else p,
                    f"{p} depends on the batch, and the reductions it shapes in {name} are exact",
                    (*v.taint, at),
                    self._exact_step(kref, info, p),
                    mechanism=prot.mechanism if prot is not None else "reduction_order",
                )
                continue
            if prot is not None:
                self.report_protected(prot, p, v.taint, node, f"passed as {p} to {name}")  # type: ignore[attr-defined]
            sinks = info.param_sinks(p)
            tiles = [s for s in sinks if s.kind == "reduction_tile"]
            bounds = [s for s in sinks if s.kind == "reduction_bound"]
            rng = [s for s in sinks if s.kind == "rng"]
            branches = [s for s in sinks if s.kind == "reduction_branch"]
            outputs = [s for s in sinks if s.kind in ("output", "output_reduced")]
            if tiles or (named_tile and not bounds):
                last = (
                    self._kernel_step(kref, tiles[0], f"{p} is the tile of this reduction") if tiles else at
                )
                self.an.report(
                    "reduction_tile_from_batch",
                    self.mod,
                    node,
                    p,
                    f"{p} tiles a reduction in {name} and depends on the batch",
                    (*v.taint, at),
                    last,
                )
            elif bounds and prot is None:
                self.an.report(
                    "reduction_range_from_batch",
                    self.mod,
                    node,
                    p,
                    f"{p} sets the range of a reduction loop in {name} and depends on the batch",
                    (*v.taint, at),
                    self._kernel_step(kref, bounds[0], f"{p} bounds this reduction"),
                )
            elif branches and prot is None:
                self.an.report(
                    "algorithm_selection_by_batch",
                    self.mod,
                    node,
                    p,
                    f"{p} chooses how {name} reduces (another reduction or precision) and depends on "
                    "the batch",
                    (*v.taint, at),
                    self._kernel_step(kref, branches[0], f"{p} picks the reduction"),
                )
            elif outputs and prot is None and self._chosen_elementwise(info, p, v):
                # One of a few settings, each computing every element from its own inputs: whether
                # the settings agree is settled by running them (``gate.branches``).
                self.an.report(
                    "elementwise_value_from_batch",
                    self.mod,
                    node,
                    p,
                    f"{p} is chosen by the batch and changes how {name} computes each element",
                    (*v.taint, at),
                    self._kernel_step(kref, outputs[0], f"{p} reaches the stored values"),
                    branch=launch_branch(kref, p, node),
                )
            elif outputs and prot is None and not (bounds or rng):
                reduced = any(s.kind == "output_reduced" for s in outputs)
                self.an.report(
                    "batch_value_in_kernel_output",
                    self.mod,
                    node,
                    p,
                    f"{p} changes the values {name} computes and depends on the batch",
                    (*v.taint, at),
                    self._kernel_step(kref, outputs[0], f"{p} reaches the stored values"),
                    mechanism="reduction_order" if reduced else "algorithm_selection",
                )
            elif rng and prot is None:
                self.an.report(
                    "rng_seed_from_batch",
                    self.mod,
                    node,
                    p,
                    f"{p} keys random numbers in {name} and depends on the batch",
                    (*v.taint, at),
                    self._kernel_step(kref, rng[0], f"{p} keys this draw"),
                )
        self._grid_sinks(kref, info, grid, node)
        self._launch_options(info, bound, kwargs, node)
        self._autotune(kref, info, bound, node)
        if info.heuristics:
            self._heuristics(kref, info, bound, node)
        self._atomics(kref, info)

    def _grid_sinks(self, kref: KernelRef, info: KernelInfo, grid: list[V] | None, node: ast.Call) -> None:
        axes = list(enumerate(grid)) if grid is not None else []
        for a, g in axes:
            if g.taint is None:
                continue
            splits = [s for s in info.axis_sinks(a) if s.kind != "rng"]
            if splits:
                self.an.report(
                    "split_count_from_batch",
                    self.mod,
                    node,
                    "NUM_SPLITS",
                    f"grid axis {a} of {info.name} splits a reduction and its size depends on the batch",
                    (*g.taint, self.step(node, f"grid axis {a} of {info.name}")),
                    self._kernel_step(kref, splits[0], f"program_id({a}) picks the part of the reduction"),
                )
        batch_axes = {a for a, g in axes if g.taint is not None} if grid is not None else {0}
        for s in info.sinks:
            hit = [a for a in sorted(batch_axes) if f"pid:{a}" in s.labels]
            a = hit[0] if hit else 0
            trace: tuple[str, ...] = (grid[a].taint or ()) if grid is not None and hit else ()
            if hit and s.kind in ("output", "output_reduced"):
                self.an.report(
                    "batch_value_in_kernel_output",
                    self.mod,
                    node,
                    f"program_id({a})",
                    f"grid axis {a} of {info.name} grows with the batch and program_id({a}) changes the "
                    "values it computes: a sample's result depends on where the batch places it or how "
                    "the work is split",
                    (*trace, self.step(node, f"grid axis {a} depends on the batch")),
                    self._kernel_step(kref, s, f"program_id({a}) reaches the stored values"),
                    mechanism="work_partitioning",
                )
            if hit and s.kind == "rng":
                self.an.report(
                    "rng_seed_from_batch",
                    self.mod,
                    node,
                    "RNG_SEED",
                    f"random numbers in {info.name} are keyed by the program's position along the batch axis",
                    (*trace, self.step(node, f"grid axis {a} walks the batch")),
                    self._kernel_step(kref, s, f"program_id({a}) is the sample's position"),
                )

    def _launch_options(
        self, info: KernelInfo, bound: dict[str, V], kwargs: dict[str, V], node: ast.Call
    ) -> None:
        nw = kwargs.get("num_warps")
        if nw is None or nw.taint is None:
            return
        at = self.step(node, f"num_warps of {info.name}")
        if info.order_sensitive:
            self.an.report(
                "launch_option_from_batch",
                self.mod,
                node,
                "num_warps",
                f"num_warps of {info.name} depends on the batch and decides its tl.sum tree",
                nw.taint,
                at,
            )
        elif info.has_dot:
            self.an.report(
                "launch_option_unknown_order",
                self.mod,
                node,
                "num_warps",
                f"num_warps of {info.name} depends on the batch",
                nw.taint,
                at,
            )

    def _autotune(self, kref: KernelRef, info: KernelInfo, bound: dict[str, V], node: ast.Call) -> None:
        at = info.autotune
        if at is None:
            return
        contract = self.an.contract
        shaping = info.reduction_params | {p for p in info.params if contract.is_reduction_tile(p)}
        shaping |= {p for p in at.config_params if contract.is_reduction_tile(p) or contract.protected_for(p)}
        if info.order_sensitive:
            shaping.add("num_warps")
        relevant = None if at.varying is None else sorted(at.varying & shaping)
        tainted_key = next((k for k in (at.keys or []) if k in bound and bound[k].taint is not None), None)
        if tainted_key is not None and (relevant is None or relevant):
            what = ", ".join(relevant) if relevant else "entries the analyzer cannot read"
            self.an.report(
                "autotune_key_has_batch",
                self.mod,
                node,
                tainted_key,
                f"autotune key '{tainted_key}' of {info.name} depends on the batch and its configs "
                f"differ in {what}",
                (
                    *(bound[tainted_key].taint or ()),
                    self.step(node, f"passed as {tainted_key} to {info.name}"),
                ),
                self._kernel_step(
                    kref,
                    KernelSink("autotune", frozenset(), at.line, "@triton.autotune"),
                    "the tuner picks a config per key",
                ),
            )
        elif relevant is None or relevant or at.keys is None:
            self.an.report(
                "autotune_opaque",
                kref.module,
                info.node,
                info.name,
                f"{info.name} is autotuned; which config runs is decided at run time",
                (),
                self._kernel_step(kref, KernelSink("autotune", frozenset(), at.line, ""), "autotune"),
            )

    def _heuristics(self, kref: KernelRef, info: KernelInfo, bound: dict[str, V], node: ast.Call) -> None:
        from nodice.gate.static.program import FuncRef

        contract = self.an.contract
        shaping = info.reduction_params | {p for p in info.params if contract.is_reduction_tile(p)}

        for pname, rule_node in info.heuristics.items():
            if not isinstance(rule_node, ast.Lambda) or not (
                pname in shaping or contract.protected_for(pname)
            ):
                continue
            ref = FuncRef(kref.module, rule_node, {}, [])
            out = self.call_function(ref, [V(kind="dict", keys=dict(bound))], {}, node)  # type: ignore[attr-defined]
            if out.taint is not None:
                self.an.report(
                    "heuristic_from_batch",
                    self.mod,
                    node,
                    pname,
                    f"the triton.heuristics rule for {pname} of {info.name} depends on the batch",
                    out.taint,
                    self._kernel_step(
                        kref, KernelSink("h", frozenset(), rule_node.lineno, ""), f"heuristic for {pname}"
                    ),
                )

    def _atomics(self, kref: KernelRef, info: KernelInfo) -> None:
        for a in info.atomics:
            step = self._kernel_step(
                kref, KernelSink("atomic", frozenset(), a.line, a.text), "float atomic add"
            )
            rule_id = "float_atomic_accumulation" if a.certain else "atomic_add_unknown_dtype"
            self.an.collector.add(
                rule_id,
                kref.module.display,
                a.line,
                "atomic_add",
                f"{info.name} accumulates a reduction with tl.atomic_add",
                [step],
            )
