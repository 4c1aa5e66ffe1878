"""pytest plugin: CPU seconds each test costs, its own process and every process it started.

Usage: python -m pytest -p lab.scripts.cpu_per_test ... ; writes NODICE_CPU_LOG (default
cpu_per_test.tsv) lines of `cpu_s<TAB>wall_s<TAB>nodeid`. A test's CPU is the change in this
process's own and reaped children's time plus that of its live descendants (a fork server's
workers are reaped by the server, so the server's own counters carry them)."""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / TICK


def _tree_cpu() -> float:
    me = os.getpid()
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            s = _stat(int(entry))
            if s is not None:
                stats[int(entry)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [me]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    c0, t0 = _tree_cpu(), time.monotonic()
    yield
    c1, t1 = _tree_cpu(), time.monotonic()
    with open(os.environ.get("NODICE_CPU_LOG", "cpu_per_test.tsv"), "a") as f:
        f.write(f"{c1 - c0:.2f}\t{t1 - t0:.2f}\t{item.nodeid}\n")
