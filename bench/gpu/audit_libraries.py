"""The two ends of `bench/gpu/audit_libraries.sh`: which `nodice audit --baseline` jobs to run, and their
rows gathered into one report that `bench/audit_table.py` reads.

    python3 bench/gpu/audit_libraries.py jobs WORK [TASK ...]   # WORK/jobs.tsv, WORK/missing.json
    python3 bench/gpu/audit_libraries.py collect WORK OUT.json  # WORK/<i>.{json,err,rc} -> OUT.json

`jobs` loads every library baseline of every task (of the tasks named) on CUDA, as `nodice bench kernels`
loads them: one that does not load (its library missing, or no CUDA) is a `baselines_missing` entry with
its reason and gets no job; the others are listed one per line (`index<TAB>task<TAB>name`), optional
libraries first, so the long audits (JIT builds) start early.

`collect` reads each job's `nodice audit --json` rows (the last JSON array on its stdout; libraries may
print before it), and writes the report in the shape of a `nodice bench kernels` report's audit fields:
`{"device", "device_type", "date", "command", "versions", "tasks": {task: {"baselines_bi": {name:
{"verdict", "detail", "mechanism"}}, "baselines_missing": {name: reason}}}}`. A job stopped by its time
limit (exit status 124) or one that printed no rows is an `error` with the last line it wrote.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

TIMED_OUT = 124


def jobs(work: Path, tasks: list[str]) -> int:
    import torch

    from nodice.measuring.baselines import baselines_for, load_baselines
    from nodice.tasks import CATALOG

    cuda = torch.device("cuda")
    unknown = [t for t in tasks if t not in CATALOG]
    if unknown:
        print(f"audit_libraries: unknown task(s) {', '.join(unknown)}", file=sys.stderr)
        return 2

    listed: list[tuple[bool, str, str]] = []
    missing: dict[str, dict[str, str]] = {}
    for task in tasks or list(CATALOG):
        loaded, why = load_baselines(task, cuda)
        if why:
            missing[task] = why
        providers = {b.name: b.provider for b in baselines_for(task, cuda)}
        listed += [(providers[name] == "torch", task, name) for name in loaded]
    listed.sort(key=lambda job: job[0])  # stable: optional libraries first, catalog order within
    work.mkdir(parents=True, exist_ok=True)
    lines = [f"{i}\t{task}\t{name}\n" for i, (_, task, name) in enumerate(listed)]
    (work / "jobs.tsv").write_text("".join(lines), encoding="utf-8")
    (work / "missing.json").write_text(json.dumps(missing, indent=2), encoding="utf-8")
    print(f"audit_libraries: {len(lines)} audits, {sum(map(len, missing.values()))} baselines not loadable")
    return 0


def audit_rows(stdout: str) -> list[dict[str, Any]] | None:
    """The rows of ``nodice audit --json``: the last JSON array on stdout (None when there is none)."""
    starts = [i for i, line in enumerate(stdout.splitlines()) if line == "["]
    lines = stdout.splitlines()
    for start in reversed(starts):
        try:
            rows = json.loads("\n".join(lines[start:]))
        except json.JSONDecodeError:
            continue
        if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
            return rows
    return None


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def job_result(work: Path, index: str, limit_s: str) -> dict[str, str]:
    """One job's verdict, detail and mechanism, from its stdout, stderr and exit status."""
    status = _read(work / f"{index}.rc").strip()
    rc = int(status) if status.lstrip("-").isdigit() else None
    rows = audit_rows(_read(work / f"{index}.json"))
    if rows:
        row = rows[0]
        return {"verdict": str(row.get("verdict", "error")), "detail": str(row.get("detail", "")),
                "mechanism": str(row.get("mechanism", ""))}  # fmt: skip
    if rc == TIMED_OUT:
        detail = f"timed out after {limit_s} s (loading, JIT builds and the audit)"
    elif rc is None and (work / f"{index}.err").exists():
        detail = "stopped by the time limit of all the audits (TOTAL_S) while running"
    elif rc is None:
        detail = "not run: the time limit of all the audits (TOTAL_S) ended first"
    else:
        detail = f"nodice audit exited {rc} without rows"
    tail = _last_line(_read(work / f"{index}.err"))
    return {"verdict": "error", "detail": f"{detail}; last: {tail}" if tail else detail, "mechanism": ""}


def collect(work: Path, out_path: Path, limit_s: str, command: str) -> int:
    import torch

    from nodice.measuring.baselines import baselines_for, provider_versions
    from nodice.measuring.provenance import environment, gpu_versions
    from nodice.tasks import CATALOG

    machine, versions = environment("cuda")
    versions |= gpu_versions()
    versions |= provider_versions(b for t in CATALOG for b in baselines_for(t, torch.device("cuda")))
    tasks: dict[str, dict[str, Any]] = {}
    missing = json.loads((work / "missing.json").read_text(encoding="utf-8"))
    for line in (work / "jobs.tsv").read_text(encoding="utf-8").splitlines():
        index, task, name = line.split("\t")
        entry = tasks.setdefault(task, {"baselines_bi": {}, "baselines_missing": {}})
        entry["baselines_bi"][name] = job_result(work, index, limit_s)
    for task, reasons in missing.items():
        tasks.setdefault(task, {"baselines_bi": {}, "baselines_missing": {}})["baselines_missing"] = reasons
    report = {
        "format": "nodice-audit-libraries",
        "device": machine,
        "device_type": "cuda",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command,
        "versions": versions,
        "tasks": {t: tasks[t] for t in CATALOG if t in tasks},
    }
    out_path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    verdicts = [a["verdict"] for e in tasks.values() for a in e["baselines_bi"].values()]
    print(f"audit_libraries: {len(verdicts)} audited: " + ", ".join(
        f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))  # fmt: skip
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "jobs":
        return jobs(Path(argv[1]), argv[2:])
    if len(argv) >= 3 and argv[0] == "collect":
        limit_s = argv[3] if len(argv) > 3 else "?"
        command = argv[4] if len(argv) > 4 else ""
        return collect(Path(argv[1]), Path(argv[2]), limit_s, command)
    print("usage: audit_libraries.py jobs WORK [TASK ...] | collect WORK OUT.json [LIMIT_S] [COMMAND]",
          file=sys.stderr)  # fmt: skip
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
