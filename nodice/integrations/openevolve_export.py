"""``nodice export openevolve TASK --out DIR``: the three files ``openevolve-run`` needs, nodice as the judge.

    DIR/initial_program.py   the task's seed, its code after the imports between
                             OpenEvolve's ``# EVOLVE-BLOCK-START`` / ``# EVOLVE-BLOCK-END``
    DIR/evaluator.py         OpenEvolve's evaluation functions over
                             :class:`nodice.integrations.openevolve.OpenEvolveEvaluator`
    DIR/config.yaml          cascade evaluation (the gate, then the benchmark), artifacts in
                             the prompt, the LLM endpoint and model, a system message on the task

``openevolve-run DIR/initial_program.py DIR/evaluator.py --config DIR/config.yaml``
then evolves the kernel.
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from nodice.errors import NodiceError

DEFAULT_API_BASE = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4.1"
DEVICES = ("cpu", "cuda")
START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"
FILES = ("initial_program.py", "evaluator.py", "config.yaml")
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


class ExportError(NodiceError):
    kind = "cannot export"


@dataclass(frozen=True)
class OpenEvolveExport:
    """What to export. ``device`` None: CUDA if the machine running OpenEvolve has it, else CPU."""

    task: str
    out: Path
    device: str | None = None
    api_base: str = DEFAULT_API_BASE
    model: str = DEFAULT_MODEL
    iterations: int = 100
    parallel: int = 1
    seed: Path | None = None
    entry: str = "kernel"
    force: bool = False


def mark_evolve_block(source: str) -> str:
    """The seed with its code after the docstring and leading imports inside one evolve block.

    A seed that already has evolve blocks is kept as it is (when its markers pair up).
    """
    lines = source.splitlines()
    starts = sum(ln.strip() == START for ln in lines)
    ends = sum(ln.strip() == END for ln in lines)
    if starts or ends:
        if starts != ends:
            raise ExportError(f"the seed has {starts} {START} and {ends} {END} markers")
        return source if source.endswith("\n") else source + "\n"
    tree = ast.parse(source)
    body = list(tree.body)
    i = 0
    first_value = getattr(body[0], "value", None) if body else None
    if isinstance(first_value, ast.Constant) and isinstance(first_value.value, str):  # the docstring
        i = 1
    while i < len(body) and isinstance(body[i], (ast.Import, ast.ImportFrom)):
        i += 1
    if i == len(body):
        raise ExportError("the seed has no code after its imports to evolve")
    node = body[i]
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
    # Comments right above the first statement belong to it.
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    marked = [*lines[:first], START, *lines[first:]]
    while marked and not marked[-1].strip():
        marked.pop()
    return "\n".join([*marked, END]) + "\n"


def _seed_source(opts: OpenEvolveExport) -> str:
    path = opts.seed or EXAMPLES_DIR / opts.task / "seed.py"
    if not path.is_file():
        where = str(opts.seed) if opts.seed else f"the task '{opts.task}' ships no seed; pass --seed FILE"
        raise ExportError(f"no seed kernel: {where}")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"cannot read the seed {path}: {exc}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ExportError(f"the seed {path} does not parse: line {exc.lineno}: {exc.msg}") from None
    if opts.entry not in _top_level_names(tree):
        raise ExportError(f"the seed {path} defines no {opts.entry!r} (pass --entry NAME)")
    return source


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def initial_program(opts: OpenEvolveExport, signature: str) -> str:
    header = (
        f"# nodice task {opts.task}: {signature}\n"
        f"# OpenEvolve evolves the code between the {START.removeprefix('# ')} and "
        f"{END.removeprefix('# ')} markers;\n"
        "# nodice judges every version: batch invariance and correctness first, then throughput.\n"
    )
    return header + mark_evolve_block(_seed_source(opts))


def evaluator_program(opts: OpenEvolveExport) -> str:
    return f'''"""OpenEvolve evaluator: nodice judges every program for the task {opts.task!r}.

Written by `nodice export openevolve`. With cascade evaluation, evaluate_stage1 is
nodice's batch-invariance gate (static analysis, correctness, dynamic validation)
and evaluate_stage2 its benchmark; a rejected program scores combined_score 0 and
its diagnostics reach the next prompt as artifacts. Programs run in nodice's
sandboxed worker. device None: CUDA when available, else CPU.
"""

from nodice.integrations.openevolve import OpenEvolveEvaluator

NODICE = OpenEvolveEvaluator({opts.task!r}, device={opts.device!r}, entry={opts.entry!r})


def evaluate(program_path):
    return NODICE.evaluate(program_path)


def evaluate_stage1(program_path):
    return NODICE.evaluate_stage1(program_path)


def evaluate_stage2(program_path):
    return NODICE.evaluate_stage2(program_path)
'''


def system_message(opts: OpenEvolveExport, describe: dict[str, object]) -> str:
    unit = describe["unit"]
    device = {
        "cpu": "\nThe kernel runs on CPU: Triton kernels under Triton's interpreter, in float32.",
        "cuda": "",
        None: "",
    }[opts.device]
    return (
        textwrap.dedent(
            f"""\
        You are an expert GPU kernel engineer. You improve one Python file whose function
        `{opts.entry}` implements the nodice task `{opts.task}` ({describe["family"]}):
            {describe["signature"]}
        nodice judges every version in this order: static batch-invariance analysis,
        correctness against the task's fp32 reference, dynamic batch-invariance validation,
        then a benchmark. Batch invariance: one sample ({describe["sample"]}) must give a
        bitwise identical output alone and inside any batch, at any position, with any
        batchmates. A version rejected at any stage scores 0 (combined_score); a passing
        one scores its geometric-mean throughput over the task's workloads in {unit}.
        So no tile size, split count, code path, launch option or RNG seed may depend on
        the batch size or on other samples, and no float atomics may accumulate across
        programs. Calling a library implementation of the whole operation is a cheat.
        When a version was rejected, nodice's diagnostics (mechanism, dependency path,
        repair guidance, first mismatch) are under "Last Execution Output": fix that first."""
        )
        + device
    )


def _yaml_block(text: str, indent: int) -> str:
    """A YAML literal block (``|``) holding ``text`` verbatim."""
    pad = " " * indent
    return "|\n" + "\n".join(pad + line if line else "" for line in text.splitlines())


def config_yaml(opts: OpenEvolveExport, describe: dict[str, object]) -> str:
    from nodice.integrations.openevolve import CASCADE_THRESHOLD, GATE_PASSED_SCORE

    q = json.dumps  # a JSON string is a valid YAML scalar
    device_text = opts.device or "cuda when available, else cpu"
    return f"""\
# OpenEvolve configuration for the nodice task {opts.task} (written by `nodice export openevolve`).
#   openevolve-run initial_program.py evaluator.py --config config.yaml --iterations N
# The API key comes from OPENAI_API_KEY (never stored here).
max_iterations: {opts.iterations}
checkpoint_interval: 10
random_seed: 42
language: python
diff_based_evolution: true
# Only the evolve block changes; the header and imports stay as exported.
enforce_evolve_blocks: true
max_code_length: 40000

llm:
  api_base: {q(opts.api_base)}
  models:
    - name: {q(opts.model)}
      weight: 1.0
  temperature: 0.7
  max_tokens: 16384
  timeout: 600
  retries: 3

prompt:
  system_message: {_yaml_block(system_message(opts, describe), 4)}
  # nodice's verdict and diagnostics reach the LLM through the parent program's artifacts.
  include_artifacts: true
  max_artifact_bytes: 20480

evaluator:
  # nodice runs every program on: {device_text}. That is set in evaluator.py, since
  # OpenEvolve calls the stage functions with the program's path alone.
  # Stage 1 is nodice's gate (combined_score 0 when rejected, {GATE_PASSED_SCORE} when passed),
  # stage 2 the benchmark (combined_score = geomean throughput in {describe["unit"]}).
  cascade_evaluation: true
  cascade_thresholds: [{CASCADE_THRESHOLD}]
  # Evaluations in flight, each in its own process and nodice worker; on one GPU keep 1,
  # or concurrent benchmarks time each other.
  parallel_evaluations: {opts.parallel}
  # Per stage, in seconds: nodice's own step budgets report a hung kernel well before.
  timeout: 1800
  # nodice returns a verdict for every bad program; a retry would only repeat it.
  max_retries: 1
"""


def _check(opts: OpenEvolveExport) -> None:
    if opts.device not in (None, *DEVICES):
        raise ExportError(f"--device must be cpu or cuda, not {opts.device!r}")
    if opts.iterations < 1 or opts.parallel < 1:
        raise ExportError("--iterations and --workers must be at least 1")
    if not opts.api_base.startswith(("http://", "https://")):
        raise ExportError(f"--api-base must be an http(s) URL, not {opts.api_base!r}")
    if not opts.model.strip():
        raise ExportError("--model must not be empty")
    if not opts.entry.isidentifier():
        raise ExportError(f"--entry must be a Python name, not {opts.entry!r}")


def export_openevolve(opts: OpenEvolveExport) -> list[Path]:
    """Write the three files into ``opts.out`` and return their paths."""
    from nodice.tasks import get_task

    _check(opts)
    describe = get_task(opts.task).describe()
    contents = {
        "initial_program.py": initial_program(opts, str(describe["signature"])),
        "evaluator.py": evaluator_program(opts),
        "config.yaml": config_yaml(opts, describe),
    }
    targets = [opts.out / name for name in FILES]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not opts.force:
        raise ExportError(f"{existing[0]} exists; pass --force to overwrite")
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
        for path in targets:
            path.write_text(contents[path.name], encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write to {opts.out}: {exc.strerror or exc}") from None
    return targets
