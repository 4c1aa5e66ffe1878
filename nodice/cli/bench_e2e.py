"""``nodice bench e2e``: deterministic generation end to end in transformers, and what it costs."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from nodice.cli.common import err, fail, outputs_problem, seed_problem, wrote
from nodice.errors import NodiceError

PHASES = ("invariance", "tax", "forward", "profile")


def e2e(
    preset: Annotated[
        str, typer.Option(help="tiny (CPU, Triton's interpreter) or 8b (Llama-3-8B dimensions)")
    ] = "tiny",
    model: Annotated[
        str | None,
        typer.Option(help="llama3, qwen3 or qwen3_moe (8b: Qwen3-30B-A3B's; default: the preset's)"),
    ] = None,
    layers: Annotated[int | None, typer.Option(min=1, help="decoder layers (default: the preset's)")] = None,
    requests: Annotated[int | None, typer.Option(min=1, help="requests in the invariance runs")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            "-b",
            help="nodice, paged|sdpa, paged|sdpa+cuda-graphs (the tax only), paged|flash_attention_2 "
            "(default: all installed); nodice-eager: nodice without CUDA graphs (the tax only, by name)",
        ),
    ] = None,
    phase: Annotated[
        list[str] | None,
        typer.Option(
            "--phase",
            help="invariance, tax, forward, profile (GPU: kernel-time breakdown; repeatable; default: all)",
        ),
    ] = None,
    concurrency: Annotated[
        list[int] | None,
        typer.Option("--concurrency", "-c", help="concurrency levels of the tax (repeatable)"),
    ] = None,
    control_requests: Annotated[
        int | None,
        typer.Option(min=1, help="stock backends and the sampled check: the first N requests (default: all)"),
    ] = None,
    tax_timeout: Annotated[
        float, typer.Option(min=1.0, help="seconds one timed tax run may take (finished requests count)")
    ] = 3600.0,
    sample: Annotated[bool, typer.Option(help="also check seeded sampling (nodice) for invariance")] = True,
    verify: Annotated[
        bool, typer.Option(help="run the BI gate on the kernels first (--no-verify: tests)")
    ] = True,
    seed: Annotated[int, typer.Option(help="weights, requests and sampling seed")] = 0,
    alone_dir: Annotated[
        Path | None,
        typer.Option(
            help="keep each backend's requests-alone outcomes here; a later run with the same settings "
            "reads them and runs only the requests missing (a long run over several time-limited calls)"
        ),
    ] = None,
    alone_shard: Annotated[
        str | None,
        typer.Option(
            metavar="I/N",
            help="with --alone-dir and the invariance phase: run only requests I, I+N, … alone and store "
            "them (N such processes share the work on one GPU; a run without it then reads them all)",
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the report here, after every phase")
    ] = None,
    markdown_out: Annotated[
        Path | None, typer.Option("--markdown", help="write the tables as Markdown")
    ] = None,
) -> None:
    """Requests through transformers' generate_batch with nodice and the stock backends: each request's
    tokens and logits against the same request alone under several schedules, and the tokens/s tax.

    Exits 1 when nodice shows a mismatch.
    """
    low = [c for c in concurrency or [] if c < 1]
    problem = (
        seed_problem(seed)
        or (f"--concurrency must be 1 or more, not {low[0]}" if low else "")
        or outputs_problem((("--json", json_out), ("--markdown", markdown_out)))
    )
    if problem:
        fail(problem)
    try:
        import nodice.integrations.transformers  # noqa: F401  (on CPU: Triton's interpreter before transformers)
    except ImportError as exc:
        fail(f"nodice bench e2e needs the transformers extra (pip install 'nodice[transformers]'): {exc}")
    from nodice.gate.runtime import resolve_device
    from nodice.integrations.transformers.e2e import EAGER, STOCK, run_e2e
    from nodice.integrations.transformers.table import markdown
    from nodice.integrations.transformers.workload import preset as make_preset

    phases = tuple(phase or PHASES)
    if alone_dir is not None and alone_dir.exists() and not alone_dir.is_dir():
        fail(f"--alone-dir {alone_dir}: not a folder")
    shard = None
    if alone_shard is not None:
        i, _, n = alone_shard.partition("/")
        if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
            fail(f"--alone-shard {alone_shard}: expected I/N with 0 <= I < N")
        if alone_dir is None or phases != ("invariance",):
            fail("--alone-shard runs requests alone only: give --alone-dir and --phase invariance alone")
        shard = (int(i), int(n))
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        fail(f"unknown phase(s): {', '.join(unknown)} (known: {', '.join(PHASES)})")
    known = ("nodice", EAGER, *STOCK)
    bad = [b for b in backend or [] if b not in known]
    if bad:
        fail(f"unknown backend(s): {', '.join(bad)} (known: {', '.join(known)})")
    try:
        dev = resolve_device(device).type
        chosen = make_preset(
            preset,
            layers=layers,
            family=model,
            requests=requests,
            concurrency=tuple(concurrency) if concurrency else None,
        )
    except NodiceError as exc:
        fail(exc.line())
        return
    command = "nodice " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    t0 = time.monotonic()
    try:
        report = run_e2e(
            chosen,
            dev,
            backends=list(backend) if backend else None,
            phases=phases,
            seed=seed,
            verify=verify,
            sample=sample,
            json_path=json_out,
            command=command,
            control_requests=control_requests,
            tax_timeout_s=tax_timeout,
            alone_dir=alone_dir,
            alone_shard=shard,
            say=lambda line: err.print(
                f"[{time.monotonic() - t0:7.1f} s] {line}", markup=False, highlight=False
            ),
        )
    except NodiceError as exc:
        fail(exc.line())
        return
    wrote(markdown_out, lambda: markdown(report), json_out)
    ours = [
        *report["invariance"].get("nodice", {}).get("schedules", {}).values(),
        *report["sampled"].get("nodice", {}).get("schedules", {}).values(),
    ]
    bad_runs = [c for c in ours if c["token_mismatches"] or c["logit_mismatches"] or c["errors"]]
    if bad_runs:
        err.print(f"nodice: {len(bad_runs)} schedule(s) with mismatches", markup=False, highlight=False)
        raise typer.Exit(1)
