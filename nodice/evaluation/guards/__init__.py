"""Anti-cheat guards: one named rule per module, each with its own test under tests/adversarial.

``static_violation`` reads the source before anything runs; :class:`Guardian`
watches the loaded kernel at run time.
"""

from __future__ import annotations

import ast

from nodice.evaluation.guards import (
    background_thread,
    cached_output,
    fake_output,
    harness_tampering,
    input_mutation,
    library_call,
    precision_downgrade,
    uninitialised_memory,
    unsynchronized_work,
)
from nodice.gate.result import CheatDetected
from nodice.tasks.base import Task

# Rule name → what it forbids, in the order the guards apply them.
RULES: dict[str, str] = {
    m.RULE: m.DESCRIPTION
    for m in (
        library_call,
        harness_tampering,
        fake_output,
        input_mutation,
        unsynchronized_work,
        background_thread,
        uninitialised_memory,
        precision_downgrade,
        cached_output,
    )
}


def static_violation(source: str, filename: str, task: Task) -> CheatDetected | None:
    """The first rule the source breaks on its face, or ``None`` (unparsable code is the loader's job)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return None
    name = filename.rsplit("/", 1)[-1]
    hit = library_call.static_check(tree, task)
    if hit:
        return CheatDetected(library_call.RULE, f"{name}:{hit[0]} {hit[1]}")
    hit = harness_tampering.static_check(tree)
    if hit:
        return CheatDetected(harness_tampering.RULE, f"{name}:{hit[0]} {hit[1]}")
    return None


__all__ = ["RULES", "CheatDetected", "static_violation"]
