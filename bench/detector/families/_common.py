"""What a generated candidate is, and how its source is assembled from shared pieces."""

# ruff: noqa: E501

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field


@dataclass
class Candidate:
    name: str
    task: str
    mechanism: str  # work_partitioning | reduction_order | algorithm_selection | expert_routing | rng
    # | atomics | autotune | none (a harmless pattern)
    pattern: str
    intended: str  # "violating" | "invariant"
    description: str
    source: str
    observable_on: tuple[str, ...] = ("cpu", "cuda")
    helpers: dict[str, str] = field(default_factory=dict)  # sibling files the candidate imports


HEADER = "import torch\nimport triton\nimport triton.language as tl\n"


def module(doc: str, *parts: str, imports: str = "") -> str:
    """A candidate file: docstring, imports, then the given code pieces separated by blank lines.

    ``imports``: extra import lines, placed in the import block (stdlib ones first, sibling ones last).
    """
    lines = [ln for ln in imports.strip().splitlines() if ln]
    stdlib = "".join(f"{ln}\n" for ln in lines if not ln.split()[1].startswith("_"))
    local = "".join(f"{ln}\n" for ln in lines if ln.split()[1].startswith("_"))
    head = (stdlib + "\n" if stdlib else "") + HEADER + local
    body = "\n\n".join(textwrap.dedent(p).strip("\n") for p in parts)
    return f'"""{doc}"""\n\n{head}\n\n{body}\n'


def violating(name: str, task: str, mechanism: str, pattern: str, description: str, source: str, **kw) -> Candidate:
    return Candidate(name, task, mechanism, pattern, "violating", description, source, **kw)


def invariant(name: str, task: str, pattern: str, description: str, source: str, **kw) -> Candidate:
    return Candidate(name, task, "none", pattern, "invariant", description, source, **kw)


def decorated(decorators: str, kernel: str) -> str:
    """``kernel`` (a Triton source piece) under extra decorators, e.g. autotune or heuristics."""
    return textwrap.dedent(decorators).strip("\n") + "\n" + textwrap.dedent(kernel).strip("\n")
