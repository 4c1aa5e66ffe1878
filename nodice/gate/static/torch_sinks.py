"""PyTorch calls that are sinks: routing, random streams and seeds, scatter-adds, library kernels."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from nodice.gate.static.values import V

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo


class TorchSinksMixin:
    an: Analysis
    mod: ModuleInfo
    seeded_loops: set[int]

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def in_sample_loop(self) -> int | None: ...

        def _batch_of(self, values: list[V]) -> tuple[Any, int, int | None]: ...

        def _size_batch(self, values: list[V], node: ast.AST) -> Any: ...

    def routing(
        self, fn: str, recv: V, rest: list[V], kwargs: dict[str, V], node: ast.Call, over_batch: bool
    ) -> None:
        k = kwargs.get("k", rest[0] if fn == "topk" and rest else None)
        if recv.taint is not None:
            trace, why = recv.taint, f"routing input of {fn} depends on the batch"
        elif k is not None and k.taint is not None:
            trace, why = k.taint, f"the k of {fn} depends on the batch"
        elif over_batch and recv.rank is not None and recv.rank >= 2:
            trace, why = (
                (self.step(node, f"{fn} across the token axis"),),
                f"tokens compete across the batch in {fn}",
            )
        else:
            return
        self.an.report(
            "expert_routing_from_batch",
            self.mod,
            node,
            "ROUTING",
            why,
            trace,
            self.step(node, f"{fn} decides the routing"),
        )

    def rng_draw(self, fn: str, args: list[V], kwargs: dict[str, V], node: ast.Call, recv: V | None) -> V:
        batch, _, _ = self._batch_of(([recv] if recv is not None else []) + args)
        size_taint = self._size_batch(
            args if recv is None and fn in ("rand", "randn", "randint", "randperm") else [], node
        )
        trace = batch or size_taint
        if trace is not None:
            self.an.report(
                "rng_stream_shared_by_batch",
                self.mod,
                node,
                "RNG_SEED",
                f"{fn} draws the whole batch from one random stream: a sample's numbers depend on its "
                "position",
                trace,
                self.step(node, f"{fn} over the batch"),
            )
        else:
            loop = self.in_sample_loop()
            gen = kwargs.get("generator")
            seeded = (
                gen.ref.get("seeded_loop") == loop
                if gen is not None and gen.kind == "generator" and isinstance(gen.ref, dict)
                else loop in self.seeded_loops
            )
            if loop is not None and not seeded:
                self.an.report(
                    "rng_stream_shared_by_batch",
                    self.mod,
                    node,
                    "RNG_SEED",
                    f"{fn} inside a loop over samples continues one stream: a sample's numbers depend on "
                    "the samples before it",
                    (self.step(node, "drawn inside the loop over samples"),),
                    self.step(node, f"{fn} without a per-sample generator"),
                )
        return V(kind="tensor", batch=batch)

    def rng_seed(self, value: V, node: ast.Call, generator: V | None = None) -> None:
        loop = self.in_sample_loop()
        if generator is not None and isinstance(generator.ref, dict):
            generator.ref["seeded_loop"] = loop
        elif loop is not None:
            self.seeded_loops.add(loop)
        if value.taint is not None:
            p = self.an.contract.protected_for("seed")
            self.an.report(
                "rng_seed_from_batch",
                self.mod,
                node,
                p.name if p else "RNG_SEED",
                "the random seed depends on the batch or the sample's position",
                value.taint,
                self.step(node, "used as the random seed"),
            )

    def shape_tuned(self, fn: str, operands: list[V], node: ast.AST) -> None:
        batch, _, _ = self._batch_of(operands)
        if batch is None:
            return
        batched = [v for v in operands if v.kind == "tensor" and v.batch is not None]
        rows_only = operands and operands[0] in batched and len(batched) == 1
        # ``x @ W``: the batch is the GEMM's M, from which cuBLAS picks its kernel. With the batch on
        # both operands (``q @ k.T`` per sequence) it is a batched GEMM's batch count: unresolved. A
        # convolution's algorithm (cuDNN, oneDNN) is chosen from the input's shape, batch included, but
        # many keep a sample's bits whatever the batch: unresolved too.
        conv = fn.startswith("conv")
        rule_id = (
            "library_kernel_by_shape"
            if rows_only and fn not in ("bmm", "baddbmm") and not conv
            else "library_batched_kernel"
        )
        what = "a library convolution whose algorithm is" if conv else "a library kernel"
        self.an.report(
            rule_id,
            self.mod,
            node,
            fn,
            f"{fn} runs {what} chosen from the operands' shapes, which include the batch",
            batch,
            self.step(node, f"{fn} on a batch-shaped tensor"),
        )

    def scatter_accumulate(self, fn: str, node: ast.Call) -> None:
        self.an.report(
            "torch_scatter_accumulate",
            self.mod,
            node,
            "atomics",
            f"{fn} accumulates with atomics on CUDA; with three or more contributions per element the "
            "sum order is not fixed",
            (),
            self.step(node, f"{fn}"),
        )

    def exact_piece(self, fn: str, piece: V, node: ast.Call) -> None:
        """An exact reduction over a piece the batch cut: no grouping changes its bits, the way the
        pieces' results are combined is left to dynamic validation."""
        self.an.report(
            "exact_reduction_from_batch",
            self.mod,
            node,
            "NUM_SPLITS",
            f"{fn} over pieces whose extent depends on the batch: an exact reduction, left to dynamic "
            "validation",
            piece.cut or (),
            self.step(node, f"{fn} over the piece"),
        )

    def sample_order(self, fn: str, recv: V, node: ast.Call) -> None:
        """A sort along a sample's own axis whose keys are batch statistics (positions in a batch-wide
        union …): the order of the sample's entries, and of any reduction over them, is the batch's."""
        if recv.taint is None or not any("batch statistic" in step for step in recv.taint):
            return
        self.an.report(
            "sample_order_from_batch",
            self.mod,
            node,
            "ORDER",
            f"{fn} orders each sample's entries by keys computed from the whole batch",
            recv.taint,
            self.step(node, f"{fn} along the sample's own axis"),
        )
