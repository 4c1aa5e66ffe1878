"""One evaluation, asked once: the frozen, typed request that travels from the caller to the worker.

The CLI, the Python API, the evolution engine and the benchmarks all build an
:class:`EvaluationRequest` and hand it to an :class:`~nodice.evaluation.Evaluator`;
the worker (a sandboxed process, a Ray node, or this process under
``isolation="inline"``) runs exactly that request. It is built complete (an
absolute path, a fixed seed), so every copy of it, pickled over a pipe or sent
to a node, asks for the same evaluation.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from nodice.errors import UsageError


@dataclass(frozen=True)
class BenchOptions:
    """How a passing candidate is benchmarked.

    ``workloads``: only these (by name; empty: the task's whole benchmark set).
    ``audit_baselines``: run each library baseline's own BI audit in this process;
    ``audits``: verdicts already measured (``{baseline: {"verdict", "detail", "s"}}``), taken as given.
    ``ceilings``: the device's ceilings measured elsewhere (``{"tflops": …, "gbps": …}``), adopted as is.
    ``host_lines``: record the candidate's host lines each workload runs (``lines_run``).
    ``same_bits_as``: a kernel file (absolute path) whose outputs the candidate's must match bit for
    bit on the workloads before it is timed (a knob setting against the best version); a difference
    is the stage ``same_bits`` rejected, and nothing is timed.
    """

    workloads: tuple[str, ...] = ()
    audit_baselines: bool = False
    audits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ceilings: Mapping[str, Any] | None = None
    host_lines: bool = False
    same_bits_as: str = ""

    @classmethod
    def of(cls, options: BenchOptions | Mapping[str, Any] | None) -> BenchOptions:
        """``options`` as a :class:`BenchOptions`; a mapping with an unknown key is a usage error."""
        if options is None:
            return cls()
        if isinstance(options, BenchOptions):
            return options
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise UsageError(
                f"unknown benchmark option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        values = dict(options)
        if "workloads" in values:
            values["workloads"] = tuple(values["workloads"] or ())
        if "audits" in values:
            values["audits"] = dict(values["audits"] or {})
        return cls(**values)


@dataclass(frozen=True)
class EvaluationRequest:
    """One candidate file, judged for one task: which stages run, whether guards and the benchmark do.

    ``task`` is a catalog name (a reference task's name carries its file), so a worker in any
    process rebuilds the same task. ``static``/``correctness``/``dynamic`` choose the gate's stages
    (``--static-only`` and ``--dynamic-only`` are requests with one stage); ``guards=False`` skips the
    anti-cheat rules (and with them the benchmark, which times the guarded kernel).
    """

    path: str
    task: str
    seed: int
    entry: str = "kernel"
    static: bool = True
    correctness: bool = True
    dynamic: bool = True
    contracts: tuple[str, ...] = ()
    guards: bool = True
    bench: bool = True
    bench_options: BenchOptions = field(default_factory=BenchOptions)

    def __post_init__(self) -> None:
        if not (self.static or self.correctness or self.dynamic):
            raise UsageError("an evaluation runs at least one stage of the gate")
        if not Path(self.path).is_absolute():
            raise UsageError(f"an evaluation request names its candidate by absolute path, not {self.path!r}")

    @classmethod
    def create(
        cls,
        path: str | Path,
        task: str,
        *,
        seed: int | None = None,
        contracts: Iterable[str | Path] | None = None,
        bench_options: BenchOptions | Mapping[str, Any] | None = None,
        **stages_and_flags: Any,
    ) -> EvaluationRequest:
        """A complete request: the path made absolute, a fresh seed when none is given."""
        return cls(
            path=str(Path(path).expanduser().absolute()),
            task=task,
            seed=secrets.randbits(31) if seed is None else int(seed),
            contracts=tuple(str(c) for c in contracts or ()),
            bench_options=BenchOptions.of(bench_options),
            **stages_and_flags,
        )

    @property
    def static_only(self) -> bool:
        """Nothing of the candidate runs: no worker process is needed to keep it away from the caller."""
        return self.static and not (self.correctness or self.dynamic)

    def moved(self, path: str, contracts: Iterable[str]) -> EvaluationRequest:
        """The same request with its files at new places (a Ray node's scratch folder)."""
        return replace(self, path=path, contracts=tuple(contracts))
