"""The files a candidate consists of: its Python modules and the native sources it compiles.

Sibling Python modules are followed by the dataflow engine when imported. Native
sources are the ``.cu/.cuh/.cpp/.cc/.h/.hpp`` files the candidate names in a
string (or that share its stem), the local headers they include, and native
code embedded in Python string literals (``load_inline``, CuPy ``RawKernel``,
cuda-python/NVRTC all take the source as a string).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from nodice.gate.static.native import NativeSource, looks_native

NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")
_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')


_NATIVE_NAME = re.compile(r"""["']([\w./-]+\.(?:cu|cuh|cpp|cc|cxx|h|hpp))["']""")


def embedded_sources(tree: ast.Module, source: str, display: str) -> list[NativeSource]:
    if not looks_native(source):
        return []  # cheap text test first: walking the tree costs more than the whole analysis
    out = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and len(text) > 40 and looks_native(text):
            # A triple-quoted string's first line is the line of its opening quotes.
            out.append(NativeSource(display, text, getattr(node, "lineno", 1)))
    return out


def referenced_native_files(sources: list[str], candidate: Path, listing: frozenset[str]) -> list[Path]:
    """Native files named in the candidate's strings, or sharing its stem, inside its folder."""
    folder = candidate.parent
    names = {Path(m.group(1)).name for text in sources for m in _NATIVE_NAME.finditer(text)}
    names |= {candidate.stem + suffix for suffix in NATIVE_SUFFIXES}
    found = [folder / n for n in sorted(names & listing)]
    # Local headers the sources include.
    i = 0
    while i < len(found) and len(found) < 32:
        try:
            text = found[i].read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for inc in _INCLUDE.findall(text):
            p = found[i].parent / inc
            if p.is_file() and p not in found:
                found.append(p)
        i += 1
    return found


def native_file_sources(paths: list[Path], candidate: Path) -> list[NativeSource]:
    out = []
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        display = str(candidate.parent / p.name) if p.parent == candidate.parent else str(p)
        out.append(NativeSource(display, text, 1))
    return out


# Marks of CUDA device code (as opposed to C++ that runs on the host).
_CUDA_MARKS = re.compile(
    r"__global__|<<<|\bthreadIdx\b|\bblockIdx\b|cuda_runtime|\bcudaStream|at::cuda|c10::cuda"
)


def cuda_code(candidate: Path) -> str | None:
    """``file:line`` of the first CUDA device code the candidate compiles (embedded or a file beside it)."""
    try:
        source = candidate.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return None
    natives = embedded_sources(tree, source, candidate.name)
    try:
        listing = frozenset(p.name for p in candidate.parent.iterdir())
    except OSError:
        listing = frozenset()
    natives += native_file_sources(referenced_native_files([source], candidate, listing), candidate)
    for src in natives:
        m = _CUDA_MARKS.search(src.text)
        if m is not None:
            return f"{Path(src.display).name}:{src.first_line + src.text.count(chr(10), 0, m.start())}"
    return None
