"""The library audit as a table per library: what was audited, what violates, how, first mismatch.

Reads a `nodice bench kernels` report (SPEC §6), whose warm-up audits every library baseline with
the gate's dynamic stage on the device (the same audit `nodice audit --baseline NAME` runs), and
prints Markdown: one row per library (artifacts audited, batch-applicable, violating), then one row
per artifact (task, verdict, the context and element of the first mismatch, and the mechanism).

    python3 bench/audit_table.py bench/results/kernels_h200.json [more reports ...]

It reads `bench/gpu/audit_libraries.sh`'s `audit_libraries.json` the same way: that report carries the
same audit fields (`tasks.<task>.baselines_bi` and `baselines_missing`), from one `nodice audit
--baseline NAME` per library baseline instead of the benchmark's warm-up.

Several reports (one device) are read as one: a task measured in two reports keeps the first
(list the newest first).

The mechanism column is the reading of each violation from the library's documented behaviour;
the gate itself reports where outputs differed (the context and the first differing element).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from nodice.measuring.baselines import baselines_for

# Why each violating library op differs with the batch (from its documented dispatch or source).
MECHANISMS = {
    "cuBLAS (torch.mm)": "kernel selection by M: cuBLAS's heuristic picks another tile or split-K",
    "flash SDPA": "split-KV count from batch × heads against the SM count (FlashAttention-2's num_splits)",
    "torch grouped_mm MoE": "cuBLAS grouped GEMM: each expert's rows (the batch's routing) pick the kernel",
    "torch per-expert mm MoE": "cuBLAS per expert: each expert's rows (the batch's routing) pick the kernel",
    "SDPA over gathered pages": "padding to the longest request: the masked reduction follows the batchmates",
    "FlashInfer MLA": "plan() balances the batch's KV over the SMs: split sizes follow the batchmates",
    "FlashInfer batch prefill": (
        "plan() schedules the whole batch: query tile from its mean query length, KV split searched over it"
    ),
    "SDPA over gathered latent pages": "padding to the longest request: the reduction follows the batchmates",
    "fla chunk_kda": "not established (its autotune keys exclude the batch)",
    "FlashInfer top-k/top-p sampling": "one Philox stream indexed by row: a draw depends on its slot",
}


def main(paths: list[str]) -> int:
    import torch

    rows = []
    versions: dict[str, str] = {}
    seen: set[str] = set()
    for path in paths:
        try:
            report = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"audit_table: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(report, dict) or not isinstance(report.get("tasks"), dict):
            print(
                f"audit_table: {path} is not a kernel benchmark report (no 'tasks' object)", file=sys.stderr
            )
            return 2
        device = torch.device(report.get("device_type") or "cuda")
        for lib, version in (report.get("versions") or {}).items():
            versions.setdefault(lib, version)
        for task, entry in (report.get("tasks") or {}).items():
            if task in seen:
                continue
            seen.add(task)
            providers = {b.name: b.provider for b in baselines_for(task, device)}
            for name, audit in (entry.get("baselines_bi") or {}).items():
                rows.append(
                    (providers.get(name, "?"), name, task, audit.get("verdict", "?"), audit.get("detail", ""))
                )
            for name, why in (entry.get("baselines_missing") or {}).items():
                rows.append((providers.get(name, "?"), name, task, "missing", why))
    by_lib: dict[str, list[tuple[str, str, str, str, str]]] = defaultdict(list)
    for r in rows:
        by_lib[r[0]].append(r)
    print("| library | artifacts audited | batch-applicable | violating | not judged |")
    print("|---|---:|---:|---:|---:|")
    for lib, rs in sorted(by_lib.items()):
        judged = [r for r in rs if r[3] in ("pass", "bi_violation")]
        bad = [r for r in judged if r[3] == "bi_violation"]
        version = versions.get(lib, "")
        print(f"| {lib} {version} | {len(rs)} | {len(rs)} | {len(bad)} | {len(rs) - len(judged)} |")
    print()
    print(
        "| library | artifact | task | verdict on the device | first mismatch (or what was run) | mechanism |"
    )
    print("|---|---|---|---|---|---|")
    for lib, name, task, verdict, detail in sorted(rows, key=lambda r: (r[0], r[2], r[1])):
        cell = detail.replace("|", "\\|")[:200]
        mechanism = MECHANISMS.get(name, "") if verdict == "bi_violation" else ""
        print(f"| {lib} | {name} | {task} | {verdict} | {cell} | {mechanism} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["bench/results/kernels_h200.json"]))
