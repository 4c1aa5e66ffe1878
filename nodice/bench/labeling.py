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

from nodice.bench.oracle import OracleConfig, config_for
from nodice.bench.pool import (
    LABELS_FILE,
    OracleLabel,
    Pool,
    PoolEntry,
    load_manifest,
    load_pool,
    source_digest,
)
from nodice.bench.provenance import environment
from nodice.bench.workers import JobOutcome, gpu_count, run_jobs
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
) -> Pool:
    """The pool with fresh ``device`` labels for the selected candidates (others keep theirs)."""
    specs = [s for s in load_manifest(root) if s.task in available()]
    target = labels or root / LABELS_FILE
    previous = {e.spec.key: e for e in load_pool(root, target).entries} if target.exists() else {}
    chosen = [s for s in specs if (not tasks or s.task in tasks) and (not keys or s.key in keys)]
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

    digests = {s.key: source_digest(root / "pool" / f"{s.key}.py") for s in chosen}

    def to_label(o: JobOutcome) -> OracleLabel:
        if o.result is None:
            return OracleLabel("excluded", f"oracle worker: {o.error}", {}, digests[o.key])
        return OracleLabel(**{**o.result, "source_sha256": digests[o.key]})

    def done(o: JobOutcome) -> None:
        if on_done is not None:
            on_done(o.key, to_label(o))

    fresh = {
        o.key: to_label(o)
        for o in run_jobs(
            "nodice.bench.oracle:oracle_job", job_list, jobs, timeout_s, done, gpu_count(device)
        )
    }
    entries = []
    for s in specs:
        labs = dict(previous[s.key].labels) if s.key in previous else {}
        if s.key in fresh:
            labs[device] = fresh[s.key]
        entries.append(
            PoolEntry(s, get_task(s.task).family, labs, source_digest(root / "pool" / f"{s.key}.py"))
        )
    oracle: dict[str, Any] = {}
    if target.exists():
        oracle = load_pool(root, target).oracle
    machine, versions = environment(device)
    configs: dict[str, OracleConfig] = {t: config_for(device, t) for t in sorted({s.task for s in specs})}
    oracle[device] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "versions": versions,
        "command": "nodice " + " ".join(sys.argv[1:]) if "nodice" in sys.argv[0] else "",
        "sweep": {
            t: {
                "batch_sizes": f"1..{c.max_batch}" + "".join(f", {b}" for b in c.extra_batches),
                "seeds": c.seeds,
                "batch1_runs": c.repeats,
                "batch_runs": c.batch_repeats,
            }
            for t, c in configs.items()
        },
    }
    return Pool(root, entries, oracle)
