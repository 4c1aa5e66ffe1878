"""Write the detector benchmark's candidate pool from the family templates.

    python bench/detector/generate.py

Writes ``pool/<task>/<name>.py`` for every candidate (plus the sibling helper
files some of them import) and ``pool/manifest.json`` describing each one:
task, mechanism, the pattern by which the batch size flows (or the harmless
use it is put to), the author's intended label, and the devices on which the
mechanism can show at all. Labels come from the oracle (``nodice bench label``),
never from this file. Files of tasks the catalog does not have yet are skipped.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "families"))

# One template module per task, in catalog order.
FAMILIES = (
    "rmsnorm",
    "add_rmsnorm",
    "layernorm",
    "gemm",
    "attention_prefill",
    "attention_decode",
    "attention_varlen",
    "dsa",
    "mla_decode",
    "moe",
    "sampling",
    "gdn",
    "kda",
)
# Candidates of several tasks kept apart from the main pool (see families/heldout.py).
EXTRA_MODULES = ("heldout",)


def main() -> int:
    from nodice.tasks import available

    present = set(available())
    final = HERE / "pool"
    # Everything is written to a fresh folder that replaces the pool only once it is complete.
    pool = HERE / "pool.new"
    shutil.rmtree(pool, ignore_errors=True)
    pool.mkdir()
    manifest: dict[str, dict[str, object]] = {}
    old = final / "manifest.json"
    old_manifest = json.loads(old.read_text())["candidates"] if old.exists() else {}
    for family in FAMILIES:
        if family not in present or not (HERE / "families" / f"{family}.py").exists():
            if (final / family).is_dir():  # keep what an earlier run made
                shutil.copytree(final / family, pool / family)
                manifest.update({k: v for k, v in old_manifest.items() if v["task"] == family})
            continue
        for c in importlib.import_module(family).candidates():
            assert c.task == family, c.name
            _write(c, pool, manifest)
    for extra in EXTRA_MODULES:
        for c in importlib.import_module(extra).candidates():
            if c.task in present:
                _write(c, pool, manifest)
    (pool / "manifest.json").write_text(json.dumps({"candidates": manifest}, indent=1) + "\n")
    # Formatted like code people write; the formatter changes layout, never behaviour.
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if Path(ruff).exists():
        subprocess.run([ruff, "check", "--quiet", "--fix", "--select", "I", str(pool)], check=True)
        subprocess.run([ruff, "format", "--quiet", str(pool)], check=True)
    changed = _sync(pool, final)
    shutil.rmtree(pool)
    violating = sum(1 for m in manifest.values() if m["intended"] == "violating")
    print(
        f"{len(manifest)} candidates ({violating} intended violating) in {final}; {changed} file(s) changed"
    )
    return 0


def _write(c: Any, pool: Path, manifest: dict[str, dict[str, object]]) -> None:
    """One candidate's file (and its helpers) under ``pool/<task>/``, and its manifest entry."""
    key = f"{c.task}/{c.name}"
    folder = pool / c.task
    folder.mkdir(parents=True, exist_ok=True)
    if key in manifest:
        raise SystemExit(f"duplicate candidate {key}")
    compile(c.source, key, "exec")  # a template bug fails here, not in the oracle
    (folder / f"{c.name}.py").write_text(c.source)
    for name, text in c.helpers.items():
        (folder / name).write_text(text)
    manifest[key] = {
        "task": c.task,
        "mechanism": c.mechanism,
        "pattern": c.pattern,
        "intended": c.intended,
        "description": c.description,
        "observable_on": list(c.observable_on),
        **({"split": c.split} if c.split != "main" else {}),
    }


def _sync(src: Path, dst: Path) -> int:
    """Make ``dst`` hold exactly ``src``'s files, touching only those that differ (a running oracle or
    benchmark keeps reading unchanged candidates)."""
    changed = 0
    new = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    for rel in sorted(new):
        target = dst / rel
        if not target.exists() or target.read_bytes() != (src / rel).read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, target)
            changed += 1
    for p in dst.rglob("*"):
        if p.is_file() and p.relative_to(dst) not in new and "__pycache__" not in p.parts:
            p.unlink()
            changed += 1
    return changed


if __name__ == "__main__":
    raise SystemExit(main())
