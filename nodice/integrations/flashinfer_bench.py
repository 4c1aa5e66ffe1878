"""FlashInfer-Bench Solutions through the gate, and nodice's results as FlashInfer-Bench Traces.

``nodice check SOLUTION.json --definition DEF.json`` reads both files with
FlashInfer-Bench's own pydantic models (``pip install nodice[flashinfer-bench]``),
writes the solution's sources into a folder (the entry file is the candidate
the gate analyses and runs) and judges it as the task of the definition
(:mod:`nodice.tasks.definition`). ``--trace OUT.jsonl`` writes the evaluation as
FlashInfer-Bench ``Trace`` objects, validated by its model, so that its
``TraceSet`` loads them; the verdict is in ``correctness.extra`` and the log
(:mod:`nodice.evaluation.export` says where and why).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodice.errors import SolutionError
from nodice.evaluation.export import trace_records
from nodice.evaluation.record import Evaluation
from nodice.integrations.fib_native import NATIVE_LANGUAGES, native_entry
from nodice.tasks.definition import Adapter, adapter_for, definition_task_name, load_definition, load_model

# Languages whose sources the gate runs as they are; CUDA and C++ go through a built entry (fib_native).
_LANGUAGES = ("python", "triton")


@dataclass(frozen=True)
class PreparedSolution:
    """A Solution written to disk and the task that judges it."""

    definition: Any
    solution: Any
    adapter: Adapter
    task: str
    candidate: Path
    entry: str


def load_solution(path: str | Path) -> Any:
    """The file as FlashInfer-Bench's own ``Solution`` model."""
    return load_model("Solution", path, SolutionError)


def prepare(solution_path: str | Path, definition_path: str | Path, folder: str | Path) -> PreparedSolution:
    """Validate the pair, write the solution's sources under ``folder`` and name the task that judges it."""
    definition = load_definition(definition_path)  # raises first when flashinfer-bench is missing
    solution = load_solution(solution_path)
    if solution.definition != definition.name:
        raise SolutionError(
            f"solution {solution.name} is for definition {solution.definition}, not {definition.name}"
        )
    language = solution.spec.language.value
    if language not in _LANGUAGES + NATIVE_LANGUAGES:
        known = ", ".join(_LANGUAGES + NATIVE_LANGUAGES)
        raise SolutionError(f"solution {solution.name} is {language}; nodice runs {known} solutions")
    adapter = adapter_for(definition)
    root = Path(folder)
    for source in solution.sources:  # the model has already refused absolute paths and '..'
        target = root / source.path
        try:
            if target.resolve() == root.resolve() or target.is_dir():
                raise IsADirectoryError(f"'{source.path}' names a folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source.content, encoding="utf-8")
        except (OSError, UnicodeError) as exc:  # a file and a folder of one name, a path too long, ...
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SolutionError(
                f"solution {solution.name}: source '{source.path[:120]}' cannot be written as a file ({why})"
            ) from None
    if language in NATIVE_LANGUAGES:
        candidate, entry = native_entry(solution, root)
    else:
        candidate, entry = root / solution.get_entry_path(), solution.get_entry_symbol()
    returns = not solution.spec.destination_passing_style
    return PreparedSolution(
        definition=definition,
        solution=solution,
        adapter=adapter,
        task=definition_task_name(definition_path, returns=returns),
        candidate=candidate,
        entry=entry,
    )


def traces(evaluation: Evaluation, prepared: PreparedSolution) -> list[Any]:
    """The evaluation as FlashInfer-Bench ``Trace`` objects (one per benchmarked workload)."""
    from flashinfer_bench.data import Trace

    var_axes = set(prepared.definition.var_axes)
    records = trace_records(
        evaluation,
        definition=prepared.definition.name,
        solution=prepared.solution.name,
        # The workload's parameters that are this definition's variable axes (a paged prefill has pages,
        # a ragged one has none).
        axes_names={k: v for k, v in prepared.adapter.var_dims.items() if v in var_axes},
    )
    out = []
    for record in records:
        record["workload"]["inputs"] = {name: {"type": "random"} for name in prepared.definition.inputs}
        out.append(Trace.model_validate(record))
    return out


def write_traces(evaluation: Evaluation, prepared: PreparedSolution, path: str | Path) -> int:
    """Write the evaluation's traces to ``path`` (JSONL, one trace a line, as FlashInfer-Bench's
    ``save_jsonl_file`` writes them, but whole or not at all); returns the count.
    :class:`~nodice.bench.output.OutputError` when the file cannot be written."""
    from nodice.bench.output import write_report

    records = traces(evaluation, prepared)
    text = "\n".join(r.model_dump_json(indent=None) for r in records) + "\n"
    write_report(Path(path), text)
    return len(records)


def relabel(result: Any, prepared: PreparedSolution, folder: str | Path, solution_path: str | Path) -> None:
    """Name the definition and the solution file (its sources) in ``result``, not their folder; say how
    a definition without per-request seeds was judged."""
    result.task = f"{prepared.definition.name} as {prepared.adapter.task}"
    if prepared.adapter.shared_rng:
        result.notes.append(
            f"{prepared.definition.name} takes no per-request seed: a solution draws from torch's global "
            "generator (seeded from the first request's seed before every call), so a request's draw "
            "follows the requests before it by the definition's interface; invariance was judged with the "
            "target first in every batch"
        )
    root = str(Path(folder))
    label = str(solution_path)

    def name(path: str) -> str:
        return f"{label}:{Path(path).relative_to(root)}" if path.startswith(root) else path

    result.candidate = name(result.candidate)
    for finding in result.findings:
        finding.file = name(finding.file)
        # The dependency path's steps name the folder's files too.
        finding.path = [step.replace(root + "/", f"{label}:") for step in finding.path]
