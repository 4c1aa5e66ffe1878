"""``nodice tasks`` (the catalog) and ``nodice demo`` (the gate on every bundled example)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nodice.cli.common import VERDICT_STYLE, fail, out

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


def tasks(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the task catalog with signatures and workloads."""
    from nodice.tasks import all_tasks

    catalog = [t.describe() for t in all_tasks()]
    if as_json:
        print(json.dumps(catalog, indent=2))
        return
    for t in catalog:
        out.print(f"[bold]{t['name']}[/] ({t['family']}; sample: {t['sample']})")
        out.print(f"  {t['signature']}", markup=False, highlight=False)
        table = Table(show_header=True, header_style="dim", box=None, padding=(0, 2))
        table.add_column("workload")
        table.add_column("model")
        table.add_column("shape")
        for w in t["workloads"]:
            shape = ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("name", "model"))
            table.add_row(w["name"], w["model"], shape)
        out.print(table)
        cpu = [w["name"] for w in t.get("cpu_workloads", [])]
        if cpu:
            out.print(f"  on a CPU (Triton's interpreter): {', '.join(cpu)}", markup=False, highlight=False)
    out.print(
        "Any PyTorch operator of your own: nodice check NEW.py --reference REF.py (KernelBench's Model / "
        "ModelNew convention, docs/reference.md); a FlashInfer-Bench Solution: nodice check SOLUTION.json "
        "--definition DEF.json (docs/flashinfer-bench.md)",
        style="dim",
        markup=False,
        highlight=False,
    )


# In nodice/examples/reference/ the candidates are ModelNew classes judged against this reference file.
REFERENCE_MODEL = "model.py"


def _example_task(folder: Path) -> tuple[str, str]:
    """The task and entry point the examples in ``folder`` are checked for."""
    if folder.name != "reference":
        return folder.name, "kernel"
    from nodice.references import REFERENCE_ENTRY, reference_task_name

    return reference_task_name(folder / REFERENCE_MODEL), REFERENCE_ENTRY


def demo(
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="only these tasks")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
) -> None:
    """Run the gate on every bundled example (seeds pass, violating variants are caught)."""
    from nodice.evaluation.sandbox import check_isolated

    folders = sorted(p for p in EXAMPLES_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if task:
        folders = [f for f in folders if f.name in task]
    table = Table(title="nodice check on the bundled examples")
    for col in ("task", "candidate", "expected", "verdict", "ms", "reason"):
        table.add_column(col, overflow="fold")
    surprises = 0
    for folder in folders:
        for f in sorted(folder.glob("*.py")):
            if f.name.startswith("_") or f.name == REFERENCE_MODEL:
                continue
            expected = "pass" if f.stem == "seed" else "reject"
            task_name, entry = _example_task(folder)
            r = check_isolated(path=str(f), task=task_name, entry=entry, device=device, seed=seed)
            ms = sum(s.ms for s in r.stages)
            ok = (r.verdict == "pass") == (expected == "pass") and r.verdict != "error"
            surprises += not ok
            style = VERDICT_STYLE.get(r.verdict, "")
            table.add_row(
                folder.name, f.name, expected, f"[{style}]{r.verdict}[/]", f"{ms:.0f}", (r.reason or "")[:90]
            )
            out.print(f"{folder.name}/{f.name}: {r.verdict}", highlight=False)
    out.print(table)
    if surprises:
        fail(f"{surprises} example(s) did not get the expected verdict")


def register(app: typer.Typer) -> None:
    app.command()(tasks)
    app.command()(demo)
