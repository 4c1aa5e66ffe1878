"""What an LLM or external agent is told: its job, the commit rule, the task, the state of the run."""

from __future__ import annotations

from nodice.evolution.scores import score_brief, standing_text, value_text
from nodice.evolution.session import RunSession

ROLE = """\
You are a GPU kernel engineer evolving a fast kernel for the task below. You are the whole \
variation operator of an evolutionary search: read the lineage, the knowledge base and the \
diagnostics, edit the kernel in the workspace, evaluate it, and commit it when it is better.

The commit rule is enforced by the run, not by you: a version is committed only if it passes the \
whole batch-invariance gate (static analysis, reference correctness, dynamic validation) with a \
benchmark, and its score — the geometric mean of its throughput over the task's workloads — is at \
least the best committed so far.

Batch invariance: a sample's output must be bitwise identical whatever batch it runs in (any batch \
size, any batchmates, any position). Never choose tile sizes, split counts, algorithms or code \
paths from the batch size or the batch contents; the gate rejects such kernels and a rejection \
cannot be argued with. Calling the task's reference or a library implementation of the whole \
operation is rejected as a cheat."""

# The vanilla baseline (`--no-bi`): the same job with correctness and speed as the only criteria.
VANILLA_ROLE = """\
You are a GPU kernel engineer evolving a fast kernel for the task below. You are the whole \
variation operator of an evolutionary search: read the lineage, the knowledge base and the \
diagnostics, edit the kernel in the workspace, evaluate it, and commit it when it is better.

The commit rule is enforced by the run, not by you: a version is committed only if it passes the \
reference correctness check with a benchmark, and its score — the geometric mean of its throughput \
over the task's workloads — is at least the best committed so far. Calling the task's reference or \
a library implementation of the whole operation is rejected as a cheat."""


def role(session: RunSession) -> str:
    return ROLE if session.config.bi else VANILLA_ROLE


WORKFLOW = """\
Work in small, checked steps: read kernel.py, form a hypothesis (search the knowledge base when \
useful), edit, then `benchmark`; when the outcome is eligible, `commit` with a message saying what \
changed and why it is faster. When a candidate is rejected, read the diagnostics and repair the \
cause before anything else. Every gate or benchmark run costs one evaluation of the budget."""

COMMAND_WORKFLOW = """\
You work in this folder (the run's workspace); edit kernel.py in place. Evaluate and commit with \
the nodice command line, which applies the gate and the commit rule:

    nodice run eval            # the whole gate and the benchmark: verdict, scores, diagnostics
    nodice run eval --gate     # the gate without the benchmark
    nodice run commit -m MSG   # commit the workspace if it passes the rule
    nodice run status          # best version, budget left, current direction
    nodice run lineage         # committed versions and scores
    nodice run search QUERY    # search the knowledge base

Each evaluation costs one unit of the budget; stop when `nodice run eval` says the budget is spent."""

# For a coding-agent CLI with nodice's MCP server configured (`nodice evolve --agent codex`, …).
MCP_WORKFLOW = """\
You work in this folder (the run's workspace); edit kernel.py in place. Evaluate and commit with \
the tools of the `nodice` MCP server, which apply the gate and the commit rule:

    benchmark          the whole gate and the benchmark: verdict, scores, diagnostics
    run_gate           the gate without the benchmark
    commit             commit the workspace if it passes the rule (give a message)
    status             best version, budget left, the supervisor's current direction
    list_lineage       committed versions and scores; show_version for a source or a diff
    search_knowledge   search the knowledge base
    task_info, profile, read_file, write_file, edit_file, list_files

A rejection comes back with its diagnostics (mechanism, dependency path, repair, first mismatch): \
repair the cause before anything else. Each evaluation costs one unit of the budget; stop when a \
tool says the budget is spent."""


def run_summary(session: RunSession) -> str:
    versions = session.versions()
    left = session.evaluations_left()
    lines = [
        f"evaluations so far: {session.evaluations_done()}" + (f", left: {left}" if left is not None else "")
    ]
    if versions:
        best = versions[-1]
        standing = standing_text(best.geomean, best.unit, best.ratio_best)
        lines.append(f"best version: v{best.version}, geomean {standing} ({best.description})")
        lines.append(f"committed versions: {len(versions)}")
        if session.run.island is not None:
            lines += [
                f"  v{v.version}{_by(v.island)}: {value_text(v.geomean, v.unit)} — {v.description[:100]}"
                for v in versions[-5:]
            ]
    else:
        lines.append("no version committed yet: the seed did not pass, make it pass first")
    recent = session.journal.attempts()[-5:]
    if recent:
        lines.append("recent attempts:")
        lines += [f"  #{a.id}{_by(a.island)} {a.label}: {a.outcome} {a.reason[:140]}" for a in recent]
    if session.run.island is not None:
        lines.append(
            f"you are island {session.run.island}: other islands search the same lineage at the same "
            "time; their commits raise the bar your candidates must meet"
        )
    return "\n".join(lines)


def _by(island: int | None) -> str:
    return "" if island is None else f" by island {island}"


def task_brief(session: RunSession) -> str:
    from nodice.tasks import get_task

    task = get_task(session.config.task)
    d = task.describe()
    entry = ""
    if "reference" in d:
        entry = (
            f"kernel.py defines `class ModelNew(torch.nn.Module)` doing what `Model` does in "
            f"{d['reference']} (read it): it is built from that file's get_init_inputs(), gets Model's "
            "parameters and buffers wherever names and shapes match, and forward() takes get_inputs()'s "
            f"arguments with the batch on axis {d['batch_axis']}.\n"
        )
    return (
        f"Task: {d['name']} — {d['signature']}\n{entry}"
        f"Sample that must be invariant: {d['sample']}. Device: {session.config.device}.\n"
        f"{score_brief(task.unit)}"
    )


def system_prompt(session: RunSession) -> str:
    return f"{role(session)}\n\n{task_brief(session)}\n\n{WORKFLOW}"


def opening_message(session: RunSession) -> str:
    return f"State of the run:\n{run_summary(session)}\n\nStart by reading kernel.py."


def command_prompt(session: RunSession, direction: str, workflow: str = COMMAND_WORKFLOW) -> str:
    steer = f"\n\nDirection from the supervisor: {direction}" if direction else ""
    return (
        f"{role(session)}\n\n{task_brief(session)}\n\n{workflow}\n\n"
        f"State of the run:\n{run_summary(session)}{steer}\n"
    )
