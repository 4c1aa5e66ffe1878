"""What a library baseline is: a name for the table, a lazy loader, the distribution behind it.

Loading is lazy because most baselines live in optional packages (FlashInfer,
Liger, fla, flash-attn-4) that a machine may not have: listing the baselines
of a task must never import them, and a missing one is reported with its
reason rather than dropped.

An implementation is called with exactly the task's kernel arguments and
returns exactly the task's output. When a library needs per-batch setup that
a server does once per step outside the operation (FlashInfer's ``plan()``,
page-table conversions, layout transposes), the implementation also has
``prepare(*args) -> () -> output``: the timing harness runs ``prepare`` once,
untimed, and times the closure. :class:`Prepared` gives such an
implementation its plain call, setup and operation together, for the BI
audit and correctness checks.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from nodice.errors import BaselineUnavailable

__all__ = ["Baseline", "BaselineUnavailable", "Prepared", "put_cutlass_dsl_on_path", "require"]


@dataclass(frozen=True)
class Baseline:
    """One library implementation of a task, as a kernel engineer would configure it."""

    name: str
    load: Callable[[], Callable[..., Any]]
    # The distribution that provides it (its version is recorded with every table).
    provider: str
    devices: tuple[str, ...] = ("cuda",)
    # The configuration that matters for speed or batch invariance.
    note: str = ""


class Prepared:
    """An implementation whose setup runs outside the timed call: ``impl(*args) == impl.prepare(*args)()``.

    ``dtypes``, when given, are the only input dtypes the library takes; the BI
    audit skips others without calling it (a JIT library may spend minutes
    compiling a dtype before it fails).
    """

    def __init__(
        self,
        prepare: Callable[..., Callable[[], Any]],
        name: str = "",
        dtypes: tuple[torch.dtype, ...] | None = None,
    ) -> None:
        self.prepare = prepare
        self.dtypes = dtypes
        self.__name__ = name or getattr(prepare, "__name__", "prepared")

    def __call__(self, *args: Any) -> Any:
        return self.prepare(*args)()


def require(module: str, provider: str) -> ModuleType:
    """Import ``module`` of an optional provider, or say in one line why it cannot be used."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        if missing == module or module.startswith(f"{missing}."):
            raise BaselineUnavailable(f"{provider} is not installed (no module {missing!r})") from None
        raise BaselineUnavailable(
            f"{provider}: importing {module} needs {missing!r}, not installed"
        ) from None
    except Exception as exc:  # a provider whose import fails for another reason (driver, ABI, version)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise BaselineUnavailable(
            f"{provider}: importing {module} failed: {type(exc).__name__}: {first}"[:300]
        ) from None


def put_cutlass_dsl_on_path() -> None:
    """Do what nvidia-cutlass-dsl's ``.pth`` file does, which a ``pip install --target`` never runs:
    put its ``dsl_packages`` folder (the ``cutlass`` Python package) on ``sys.path``."""
    if importlib.util.find_spec("cutlass") is not None:
        return
    spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    for root in (spec.submodule_search_locations or []) if spec else []:
        packages = Path(root) / "dsl_packages"
        if packages.is_dir() and str(packages) not in sys.path:
            sys.path.insert(0, str(packages))
