"""Batch-bucketed launch and tiling choices: a parameter step kept only for the batches it won.

The tuning move behind many production kernels' configuration tables (a tile,
a split count or a warp count looked up from the number of rows or tokens): a
parameter step that was measured faster on some workloads and slower on others
is applied only to the bucket of batch sizes where it was faster, e.g.
``num_warps=(8 if batch >= 4096 else 4)`` when eight warps won on the prefill
workloads and lost on decode. It is a genuine speed edit — every workload then
runs the value that measured fastest on it — and it makes the launch depend on
the batch size: the BI gate rejects it wherever the parameter shapes a
reduction, while a search that does not check batch invariance may commit it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from nodice.evolution.agents.mutations import ParamMutation, replace_literal
from nodice.evolution.agents.rewrites import host_batch

# Workload parameters that hold the batch size (rows, tokens of a GEMM, tokens of an MoE layer).
BATCH_PARAMS = ("B", "M", "T")


def workload_batch(score: dict[str, Any]) -> int | None:
    params = score.get("params") or {}
    for name in BATCH_PARAMS:
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


@dataclass(frozen=True)
class Bucket:
    """The batch sizes a step applies to: ``batch >= threshold`` (large) or ``batch < threshold``."""

    threshold: int
    large: bool
    won: tuple[str, ...]  # the workloads on which the step was faster than the best
    lost: tuple[str, ...]

    def condition(self, batch: str) -> str:
        return f"{batch} >= {self.threshold}" if self.large else f"{batch} < {self.threshold}"

    @property
    def label(self) -> str:
        return f">={self.threshold}" if self.large else f"<{self.threshold}"


def _round_threshold(below: int, at_least: int) -> int:
    """A round bucket boundary in ``(below, at_least]``: the largest power of two there, if any."""
    power = 1 << (at_least.bit_length() - 1)
    return power if power > below else at_least


def bucket_of(step_scores: list[dict[str, Any]], best_scores: list[dict[str, Any]]) -> Bucket | None:
    """The bucket of batch sizes on which a step beat the best on every workload, and lost on the rest.

    None when the workloads it won and lost are not separated by one batch-size boundary (or a
    workload's batch size is unknown).
    """
    best = {str(s["workload"]): float(s.get("score", 0.0)) for s in best_scores}
    rows: list[tuple[int, bool, str]] = []
    for s in step_scores:
        name, batch = str(s["workload"]), workload_batch(s)
        if name not in best or batch is None:
            return None
        rows.append((batch, float(s.get("score", 0.0)) > best[name], name))
    sizes = sorted({b for b, _, _ in rows})
    for below, at_least in pairwise(sizes):
        small = [r for r in rows if r[0] <= below]
        large = [r for r in rows if r[0] >= at_least]
        for won, lost, is_large in ((large, small, True), (small, large, False)):
            if all(r[1] for r in won) and not any(r[1] for r in lost):
                names = (tuple(r[2] for r in won), tuple(r[2] for r in lost))
                return Bucket(_round_threshold(below, at_least), is_large, *names)
    return None


@dataclass(frozen=True)
class BucketMutation:
    step: ParamMutation
    bucket: Bucket
    batch: str
    source: str

    @property
    def key(self) -> str:
        return f"bucket:{self.step.site.name}={self.step.new_value}@{self.bucket.label}"

    @property
    def description(self) -> str:
        return (
            f"{self.step.description} for batches with {self.bucket.condition(self.batch)} only "
            f"(measured faster on {', '.join(self.bucket.won)}; slower on {', '.join(self.bucket.lost)})"
        )


def bucket_mutation(source: str, step: ParamMutation, bucket: Bucket) -> BucketMutation | None:
    """``step`` applied to ``bucket`` only, in the host ``kernel`` once the batch size is known."""
    found = host_batch(source)
    if found is None:
        return None
    fn, batch = found
    bound = min(
        (n.lineno for n in ast.walk(fn) if isinstance(n, ast.Assign) and batch in ast.unparse(n.targets[0])),
        default=None,
    )
    site = step.site
    if bound is None or not (bound < site.line <= (fn.end_lineno or fn.lineno)):
        return None
    chosen = f"({step.new_value} if {bucket.condition(batch)} else {site.value})"
    new = replace_literal(source, site, chosen)
    try:
        ast.parse(new)
    except SyntaxError:
        return None
    return BucketMutation(step, bucket, batch, new)
