"""What a generated candidate is, and how its source is assembled from shared pieces."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path


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
    split: str = "main"  # "heldout": written after the analyzer was measured on the main pool


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


def violating(
    name: str, task: str, mechanism: str, pattern: str, description: str, source: str, **kw
) -> Candidate:
    return Candidate(name, task, mechanism, pattern, "violating", description, source, **kw)


def invariant(name: str, task: str, pattern: str, description: str, source: str, **kw) -> Candidate:
    return Candidate(name, task, "none", pattern, "invariant", description, source, **kw)


def decorated(decorators: str, kernel: str) -> str:
    """``kernel`` (a Triton source piece) under extra decorators, e.g. autotune or heuristics."""
    return textwrap.dedent(decorators).strip("\n") + "\n" + textwrap.dedent(kernel).strip("\n")


def seed_source(task: str) -> str:
    """The task's seed kernel as the pool was built from it (a snapshot, so later seed edits leave the
    pool and its labels as they are)."""
    return (Path(__file__).parent / "seeds" / f"{task}.py").read_text()


def from_seed(task: str, doc: str, edits: list[tuple[str, str]], append: str = "", imports: str = "") -> str:
    """The task's seed kernel with its docstring replaced by ``doc`` and each ``(old, new)`` edit applied.

    Every ``old`` must occur exactly once, so a changed seed fails the generator loudly.
    """
    src = seed_source(task)
    end = src.index('"""', 3) + 3
    src = f'"""{doc}"""' + src[end:]
    for old, new in edits:
        old, new = textwrap.dedent(old).strip("\n"), textwrap.dedent(new).strip("\n")
        # The edit is written flush left; find the indentation at which it occurs in the seed.
        for pad in ("", "    ", "        ", "            "):
            found = re.compile("^" + re.escape(textwrap.indent(old, pad)) + "$", re.MULTILINE)
            if len(found.findall(src)) == 1:
                replacement = textwrap.indent(new, pad)
                src = found.sub(lambda _m, r=replacement: r, src)
                break
        else:
            raise ValueError(f"{task} seed: no single occurrence of {old[:60]!r}")
    if imports:
        src = src.replace("import torch\n", imports.strip() + "\n\nimport torch\n", 1)
    if append:
        src = src.rstrip("\n") + "\n\n\n" + textwrap.dedent(append).strip("\n") + "\n"
    return src
