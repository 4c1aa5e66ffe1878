"""FlashInfer-Bench CUDA and C++ solutions as candidates: their sources built by torch behind a Python entry.

A Solution in ``cuda`` or ``cpp`` with the ``torch`` binding is a set of C++/CUDA
sources whose extension module (``PYBIND11_MODULE(TORCH_EXTENSION_NAME, …)``)
exports the entry symbol, as FlashInfer-Bench's own torch builder compiles it.
nodice writes the sources beside a small Python module that builds them with
``torch.utils.cpp_extension.load`` when it is imported and binds the symbol
under its own name. That module is the candidate:

- the gate's static stage reads the native sources it names (the native
  patterns of :mod:`nodice.gate.static.native`) and, on a machine without a
  GPU, stops there with a line saying correctness and dynamic validation need
  a CUDA device;
- the build runs in the sandboxed worker, off the candidate's clock (torch's
  JIT build is reported like a compilation), and torch caches it by the
  extension's name, which carries the hash of the sources: a second evaluation
  of the same solution loads it without building.

The ``tvm-ffi`` binding needs FlashInfer-Bench's TVM-FFI runtime: refused with
one line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from nodice.errors import SolutionError

NATIVE_LANGUAGES = ("cuda", "cpp")
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
ENTRY_MODULE = "_nodice_native_entry.py"

_TEMPLATE = '''"""The {name} solution's {language} sources, built by torch on import (written by nodice)."""

import os

from torch.utils.cpp_extension import load

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = {sources!r}

_extension = load(
    name={ext_name!r},
    sources=[os.path.join(_HERE, s) for s in _SOURCES],
    extra_include_paths=[_HERE],
    with_cuda={with_cuda!r},
)
{symbol} = getattr(_extension, {symbol!r})
'''


def native_entry(solution: Any, root: Path) -> tuple[Path, str]:
    """Write the Python entry of a native solution (its sources already under ``root``)."""
    spec = solution.spec
    language = spec.language.value
    binding = getattr(getattr(spec, "binding", None), "value", "torch")
    if binding != "torch":
        raise SolutionError(
            f"solution {solution.name} binds its {language} code with {binding}; nodice builds the torch "
            "binding (torch.utils.cpp_extension, as FlashInfer-Bench's torch builder does)"
        )
    entry_file = Path(solution.get_entry_path())
    if entry_file.suffix not in _SOURCE_SUFFIXES:
        raise SolutionError(
            f"solution {solution.name}: entry file {entry_file} is not a C/C++/CUDA source "
            f"({', '.join(_SOURCE_SUFFIXES)})"
        )
    symbol = solution.get_entry_symbol()
    if not symbol.isidentifier():
        raise SolutionError(f"solution {solution.name}: entry symbol {symbol!r} is not a Python name")
    sources = sorted(s.path for s in solution.sources if Path(s.path).suffix in _SOURCE_SUFFIXES)
    digest = hashlib.sha256()
    for s in sorted(solution.sources, key=lambda s: s.path):
        digest.update(s.path.encode() + b"\0" + s.content.encode() + b"\0")
    ext_name = f"nodice_fib_{digest.hexdigest()[:16]}"
    text = _TEMPLATE.format(
        name=solution.name,
        language=language,
        sources=sources,
        ext_name=ext_name,
        with_cuda=language == "cuda",
        symbol=symbol,
    )
    path = root / ENTRY_MODULE
    path.write_text(text, encoding="utf-8")
    return path, symbol
