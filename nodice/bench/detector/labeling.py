"""Label the pool: run the oracle on every candidate of the manifest and write ``labels.json``.

Labels are kept per device. Relabeling one device leaves the others' labels
as they are, so the CPU labels (made here) and the CUDA labels (made on a GPU
machine) live side by side in one file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodice.bench.detector.oracle import OracleConfig, config_for
from nodice.bench.detector.pool import (
    LABELS_FILE,
    CandidateSpec,
    OracleLabel,
    Pool,
    PoolEntry,
    PoolError,
    load_manifest,
    load_pool,
    source_digest,
)
from nodice.bench.detector.workers import JobOutcome, gpu_count, run_jobs
from nodice.bench.output import write_report
from nodice.measuring.provenance import environment
from nodice.tasks import available, get_task


def label_pool(
    root: Path,
    device: str,
    *,
    labels: Path | None = None,
    tasks: list[str] | None = None,
    keys: list[str] | None = None,
    limit: int | None = None,
    jobs: int = 1,
    timeout_s: float = 1800.0,
    on_done: Callable[[str, OracleLabel], None] | None = None,
    missing: bool = False,
) -> Pool:
    """Fresh ``device`` labels for the selected candidates (others keep theirs), saved as each one lands.

    Saving after every candidate means a long run that is stopped keeps what it finished; with
    ``missing``, only the candidates without a current label for ``device`` are labeled, so a run
    started again goes on where the stopped one was.
    """
    specs = [s for s in load_manifest(root) if s.task in available()]
    for option, asked, known in (
        ("--task", tasks, {s.task for s in specs}),
        ("--candidate", keys, {s.key for s in specs}),
    ):
        unknown = [x for x in asked or [] if x not in known]
        if unknown:
            raise PoolError(f"{option} {', '.join(unknown)}: not in the pool {root}")
    target = labels or root / LABELS_FILE
    before = load_pool(root, target) if target.exists() else None
    previous = {e.spec.key: e for e in before.entries} if before else {}
    entries = {
        s.key: PoolEntry(
            s,
            get_task(s.task).family,
            dict(previous[s.key].labels) if s.key in previous else {},
            source_digest(root / "pool" / f"{s.key}.py"),
        )
        for s in specs
    }
    pool = Pool(root, list(entries.values()), dict(before.oracle) if before else {})
    pool.oracle[device] = _provenance(device, specs)
    chosen = [s for s in specs if (not tasks or s.task in tasks) and (not keys or s.key in keys)]
    if missing:
        chosen = [s for s in chosen if entries[s.key].label(device) is None]
    chosen = chosen[:limit] if limit is not None else chosen
    job_list = [
        (
            s.key,
            {
                "path": str(root / "pool" / f"{s.key}.py"),
                "task": s.task,
                "device": device,
                "observable_on": list(s.observable_on),
            },
        )
        for s in chosen
    ]

    def done(o: JobOutcome) -> None:
        entry = entries[o.key]
        if o.result is None:
            lab = OracleLabel("excluded", f"oracle worker: {o.error}", {}, entry.source_sha256)
        else:
            lab = OracleLabel(**{**o.result, "source_sha256": entry.source_sha256})
        # How long the oracle took for it (a slow sweep on one device is worth seeing per candidate).
        lab.evidence["seconds"] = round(o.seconds, 1)
        entry.labels[device] = lab
        save_atomically(pool, target)
        if on_done is not None:
            on_done(o.key, lab)

    run_jobs("nodice.bench.detector.oracle:oracle_job", job_list, jobs, timeout_s, done, gpu_count(device))
    save_atomically(pool, target)
    return pool


def save_atomically(pool: Pool, target: Path) -> None:
    """The labels, whole or not at all; :class:`~nodice.bench.output.OutputError` when they cannot be."""
    write_report(target, pool.to_json(), "--out")


def _provenance(device: str, specs: list[CandidateSpec]) -> dict[str, Any]:
    machine, versions = environment(device)
    configs: dict[str, OracleConfig] = {t: config_for(device, t) for t in sorted({s.task for s in specs})}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "versions": versions,
        "command": "nodice " + " ".join(sys.argv[1:]) if "nodice" in sys.argv[0] else "",
        "sweep": {
            t: {
                "batch_sizes": f"1..{c.max_batch}" + "".join(f", {b}" for b in c.extra_batches),
                "seeds": c.seeds,
                "samples_per_seed": c.samples_per_seed,
                "batch1_runs": c.repeats,
                "batch_runs": c.batch_repeats,
            }
            for t, c in configs.items()
        },
    }
