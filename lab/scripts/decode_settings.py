"""attention_decode's knobs by hand on the GPU: bits against the shipped pins, registers, GB/s.

For each setting (knob=value pairs applied to a fresh copy of nodice/kernels/attention_decode.py):
every workload of the attention_decode task (bf16, the task's own inputs), the output compared bit
for bit with the shipped kernel's (settings that move an ORDER_KNOB are expected to differ: they are
timed anyway and marked), the compiled kernel's registers and spills, and the time with nodice's
timer (CUDA events, L2 flushed), as GB/s and as a fraction of the device's copy bandwidth. JSON is
written after every row.
    python3 lab/scripts/decode_settings.py --json OUT.json [--setting "MAX_REGISTERS_D128=128" ...]
    python3 lab/scripts/decode_settings.py --json OUT.json --workload b8-kv8k --workload b1-kv32k
    --setting VARIANT=0: the kernel with VARIANTS' first text change (nofold: no program folds)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from nodice.measuring.ceilings import ceilings_for
from nodice.measuring.throughput import same_size_copy_gbps
from nodice.measuring.timing import time_cuda
from nodice.tasks import get_task

KERNEL = Path(__file__).resolve().parents[2] / "nodice" / "kernels" / "attention_decode.py"

DEFAULT_SETTINGS = [
    "",
    "MAX_REGISTERS_D128=128",
    "MAX_REGISTERS_D128=96",
    "FOLD_HEADS=2",
    "FOLD_HEADS=2,MAX_REGISTERS_D128=128",
    "NUM_WARPS_D128=8",
    "BLOCK_N_D128=64",
    "BLOCK_N_D128=64,MAX_REGISTERS_D128=128",
    "BLOCK_N_D128=64,MAX_REGISTERS_D128=128,NUM_STAGES_D128=4",
    "SPLIT_TOKENS_D128=256",
    "SPLIT_TOKENS_D128=256,MAX_REGISTERS_D128=128",
    "SPLIT_TOKENS_D128=256,BLOCK_N_D128=64,MAX_REGISTERS_D128=128",
    "SPLIT_TOKENS_D128=1024",
]


def _parse(setting: str) -> dict[str, int]:
    out = {}
    for part in filter(None, setting.split(",")):
        name, value = part.split("=")
        out[name.strip()] = int(value)
    return out


# Variants for finding where the time goes (their outputs are wrong; they are timed, not used):
# `nofold`: no program folds (the partials are written, the counters bumped, the output is not).
VARIANTS = {"nofold": ("if arrived == n_splits - 1:", "if arrived == -1:")}


def _module(tag: str, knobs: dict[str, int]) -> Any:
    variant = knobs.pop("VARIANT", None)
    source = KERNEL.read_text()
    if variant is not None:
        old, new = VARIANTS[list(VARIANTS)[variant]]
        assert old in source, old
        source = source.replace(old, new)
    # Triton reads a kernel's source from its file: write the variant beside the others.
    path = Path(tempfile.gettempdir()) / f"decode_setting_{tag}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"decode_setting_{tag}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, value in knobs.items():
        if not hasattr(mod, name):
            raise SystemExit(f"attention_decode has no knob {name}")
        setattr(mod, name, value)
    return mod


def _registers(mod: Any) -> list[dict[str, int]]:
    """Registers and spills of every compiled variant of the module's kernel (best effort: the
    cache's layout is Triton's own)."""
    found = []
    caches = getattr(mod._decode_fused, "device_caches", {})
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        for compiled in getattr(cache, "values", lambda: [])():
            with contextlib.suppress(Exception):  # a lab probe: report what can be read
                compiled._init_handles()
            regs, spills = getattr(compiled, "n_regs", None), getattr(compiled, "n_spills", None)
            shared = getattr(getattr(compiled, "metadata", None), "shared", None)
            if regs is not None:
                found.append({"regs": int(regs), "spills": int(spills or 0), "shared": shared})
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--setting", action="append", help="KNOB=V[,KNOB=V…]; empty: the shipped pins")
    ap.add_argument("--workload", action="append", help="a substring of the workloads to run")
    args = ap.parse_args()
    dev = torch.device("cuda")
    task = get_task("attention_decode")
    workloads = [w for w in task.workloads() if not args.workload or any(s in w.name for s in args.workload)]
    settings = args.setting if args.setting is not None else DEFAULT_SETTINGS
    copy_gbps = ceilings_for(dev).copy_gbps
    shipped = _module("shipped", {})
    order = set(shipped.ORDER_KNOBS)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "commit": os.environ.get("NODICE_COMMIT", ""),
        "copy_gbps": round(copy_gbps, 1),
        "rows": [],
        "settings": {},
    }
    mods = []
    for i, setting in enumerate(settings):
        knobs = _parse(setting)
        moves = sorted(set(knobs) & order)
        mods.append((setting or "shipped", _module(str(i), knobs), moves))
    # Workload by workload (the largest inputs are 17 GB), every setting on the same inputs.
    for w in workloads:
        gen = torch.Generator(device="cpu").manual_seed(0)
        args_w = task.workload_inputs(w, gen, dev, torch.bfloat16)
        expected = shipped.kernel(*args_w)
        torch.cuda.synchronize()
        # A copy of the same bytes (read + write = the kernel's bytes moved): what one launch of that
        # size reaches, against the large-copy ceiling.
        nbytes = task.bytes_moved(w, torch.bfloat16)
        copy = same_size_copy_gbps(nbytes, dev)
        report["rows"].append(
            {
                "setting": "same-size copy",
                "workload": w.name,
                "ms": round(nbytes / (copy * 1e9) * 1e3, 5),
                "gbps": round(copy, 1),
                "of_copy": round(copy / copy_gbps, 3),
                "same_bits": True,
                "moves_order_knobs": [],
            }
        )
        for label, mod, moves_order in mods:
            try:
                out = mod.kernel(*args_w)
                torch.cuda.synchronize()
                same = bool(torch.equal(out, expected))
                ms = time_cuda(mod.kernel, args_w).ms
            except Exception as exc:  # a lab sweep: record and go on
                print(f"{label} {w.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
                report["rows"].append({"setting": label, "workload": w.name, "error": str(exc)[:300]})
                continue
            gbps = task.bytes_moved(w, torch.bfloat16) / (ms * 1e-3) / 1e9
            report["rows"].append(
                {
                    "setting": label,
                    "workload": w.name,
                    "ms": round(ms, 5),
                    "gbps": round(gbps, 1),
                    "of_copy": round(gbps / copy_gbps, 3),
                    "same_bits": same,
                    "moves_order_knobs": moves_order,
                }
            )
            differ = "BITS DIFFER" + (" (order knob)" if moves_order else "")
            print(
                f"{w.name:28s} {label:58s} {ms:.4f} ms {gbps:7.1f} GB/s {gbps / copy_gbps:6.1%} "
                f"{'same bits' if same else differ}",
                flush=True,
            )
            report["written"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            args.json.write_text(json.dumps(report, indent=1))
        del args_w, expected
        torch.cuda.empty_cache()
    for label, mod, moves_order in mods:
        report["settings"][label] = {"registers": _registers(mod), "moves_order_knobs": moves_order}
        print(f"{label}: registers {report['settings'][label]['registers']}", flush=True)
    args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
