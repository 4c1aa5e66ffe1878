"""Search directions: what the supervisor can steer an agent towards.

A direction is a short instruction for an LLM agent and a set of focus tags
the built-in operator maps onto its proposal weights.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Direction:
    name: str
    text: str
    focus: tuple[str, ...] = ()


CATALOG: dict[str, Direction] = {
    d.name: d
    for d in (
        Direction(
            "structure",
            "Try structural rewrites: change how work maps to programs (several samples per program, "
            "one pass over data kept in registers, fused loops). Keep every tile a function of per-sample "
            "shapes only.",
            ("rewrite",),
        ),
        Direction(
            "tiling",
            "Tune tile sizes and caps (BLOCK_*, rows per program): larger tiles cut loop trips and program "
            "count, smaller ones cut register pressure. Keep them independent of the batch.",
            ("cap", "constant", "tile"),
        ),
        Direction(
            "launch",
            "Tune launch parameters (num_warps, num_stages) of the best version, one at a time.",
            ("num_warps", "num_stages"),
        ),
        Direction(
            "bi_repair",
            "Recent candidates violated batch invariance. Remove every dependence of tile sizes, split "
            "counts or code paths on the batch size or batch contents: one code path for every batch.",
            ("no_batch_dependence",),
        ),
        Direction(
            "correctness_repair",
            "Recent candidates were incorrect or crashed. Go back to the best committed version and make "
            "one small, checked change at a time; read the diagnostics before the next edit.",
            ("small_steps",),
        ),
        Direction(
            "combine",
            "Combine changes that passed the gate but did not beat the best alone: apply two compatible "
            "ones together on the best version.",
            ("combine",),
        ),
        Direction(
            "explore",
            "Step back: start again from the best version and change a dimension no recent attempt touched.",
            ("explore",),
        ),
    )
}


def direction(name: str) -> Direction:
    return CATALOG.get(name) or Direction(name, name)
