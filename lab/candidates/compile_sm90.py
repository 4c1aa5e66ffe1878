"""Compile the candidates' kernels for sm_90a without a GPU, and say what came out.

    python3 lab/candidates/compile_sm90.py [--only NAME ...] [--keep DIR]

Triton compiles for a target given by hand (``GPUTarget("cuda", 90, 32)``) and ships ptxas, so
every stage up to the cubin runs on a CPU-only machine. Per configuration this prints whether it
compiled, the warps launched (warp specialisation adds partitions), shared memory, whether the
loop was warp-specialised, the wgmma and TMA instructions in the PTX, and ptxas's register and
spill count. It proves nothing about results or speed; it catches compiler crashes, shared memory
overflow, spills and a warp specialisation that silently did not happen, before a GPU is booked.

Run it with the Triton the GPU machine has (3.6): its passes, not the local venv's, decide.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # jit must build compilable functions, not interpreted ones

import torch
import triton
from triton.backends.compiler import GPUTarget

HERE = Path(__file__).resolve().parent
TARGET = GPUTarget("cuda", 90, 32)
ALIGNED = [["tt.divisibility", 16]]


# Candidates that became bundled kernels are read from there.
BUNDLED = {
    "attention_prefill_gluon": HERE.parents[1] / "nodice" / "kernels" / "attention_prefill.py",
    "gdn_chunked": HERE.parents[1] / "nodice" / "kernels" / "gdn.py",
    "gemm": HERE.parents[1] / "nodice" / "kernels" / "gemm.py",
    "attention_decode": HERE.parents[1] / "nodice" / "kernels" / "attention_decode.py",
}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BUNDLED.get(name, HERE / f"{name}.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ptxas_usage(ptx: str) -> str:
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        arch = "sm_90a"
        out = subprocess.run(
            [get_ptxas(90).path, f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True,
            text=True,
        )
    text = out.stdout + out.stderr
    regs = re.findall(r"Used (\d+) registers", text)
    spills = re.findall(r"(\d+) bytes spill stores", text)
    warn = [line.strip() for line in text.splitlines() if "warning" in line.lower()]
    usage = f"regs={','.join(regs) or '?'} spill_stores={','.join(spills) or '?'}"
    return usage + (f" ptxas: {' | '.join(warn)[:300]}" if warn else "")


def report(label: str, src, options: dict, keep: Path | None) -> bool:
    t0 = time.perf_counter()
    try:
        compiled = triton.compile(src, target=TARGET, options=options)
    except Exception as exc:  # a compiler crash is the finding
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        where = lines[0] if lines else ""
        why = lines[-1] if lines else ""
        print(f"FAIL {label}: {type(exc).__name__}: {where[:120]} ... {why[:600]}", flush=True)
        return False
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    md = compiled.metadata
    warps = re.search(r'"ttg.total-num-warps" = (\d+)', ttgir)
    ws = "ttg.warp_specialize" in ttgir
    line = (
        f"ok   {label}: warps={warps.group(1) if warps else md.num_warps} smem={md.shared} "
        f"ws={ws} wgmma={ptx.count('wgmma.mma_async')} tma_load={ptx.count('cp.async.bulk.tensor')} "
        f"setmaxnreg={ptx.count('setmaxnreg')} {_ptxas_usage(ptx)} ({time.perf_counter() - t0:.0f}s)"
    )
    print(line, flush=True)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
        (keep / f"{stem}.ttgir").write_text(ttgir)
        (keep / f"{stem}.ptx").write_text(ptx)
    return True


def _attention_tma_ws_configs(mod, sweep: bool):
    for head_dim, causal in ((128, False), (128, True), (64, False), (64, True)):
        yield head_dim, causal, mod.tile_config(head_dim, causal, 2)
        if sweep:
            for tiles in mod.SWEEP_TILES.get((head_dim, causal), []):
                if tiles != mod.tile_config(head_dim, causal, 2):
                    yield head_dim, causal, tiles
    yield 128, False, mod.tile_config(128, False, 4)  # the fp32 probe's tiles


def attention_tma_ws(keep: Path | None, sweep: bool) -> int:
    mod = _load("attention_prefill_tma_ws")
    fn = mod._attention_forward
    fails = 0
    for head_dim, causal, (block_m, block_n, warps, stages, ws) in _attention_tma_ws_configs(mod, sweep):
        dtype = (
            "bf16"
            if (head_dim, causal, (block_m, block_n, warps, stages, ws))
            != (128, False, mod.tile_config(128, False, 4))
            else "fp32"
        )
        for seq_aligned in (True, False):  # S = 4096 vs S = 200: the JIT specialises S % 16
            sig = {
                "q_ptr": f"*{dtype}",
                "k_ptr": f"*{dtype}",
                "v_ptr": f"*{dtype}",
                "o_ptr": f"*{dtype}",
                "qk_scale": "fp32",
                "seq_len": "i32",
                "q_heads": "i32",
                "group": "i32",
            }
            attrs = {(i,): ALIGNED for i in range(4)}
            if seq_aligned:
                attrs[(5,)] = ALIGNED
            consts = {
                "CAUSAL": causal,
                "HEAD_DIM": head_dim,
                "BLOCK_M": block_m,
                "BLOCK_N": block_n,
                "WARP_SPECIALIZE": ws,
                "USE_TMA": True,
            }
            for name in consts:
                sig[name] = "constexpr"
            src = triton.compiler.ASTSource(fn, sig, constexprs=consts, attrs=attrs)
            label = (
                f"attention_tma_ws {dtype} D={head_dim} causal={causal} S%16={'0' if seq_aligned else '!0'} "
                f"tiles={block_m}x{block_n} w={warps} st={stages} ws={ws}"
            )
            fails += not report(label, src, {"num_warps": warps, "num_stages": stages}, keep)
    return fails


def gemm_persistent_tma(keep: Path | None, sweep: bool) -> int:
    mod = _load("gemm_persistent_tma")
    fn = mod._matmul_persistent
    configs = {mod.tile_config(n, k, 2) for n, k in mod._LAYER_TILES} | {mod.tile_config(28672, 4096, 2)}
    if sweep:
        configs |= set(mod.SWEEP_TILES)
    runs = [
        (dtype, cfg, ws)
        for cfg in sorted(configs)
        for ws in ((False, True) if sweep else (False,))
        for dtype in ("bf16",)
    ]
    runs.append(("fp32", mod.tile_config(4096, 4096, 4), False))
    fails = 0
    for dtype, (swap_ab, block_t, block_w, stages, warps), ws in runs:
        sig = {
            "a_ptr": f"*{dtype}",
            "b_ptr": f"*{dtype}",
            "c_ptr": f"*{dtype}",
            "M": "i32",
            "N": "i32",
            "K": "i32",
        }
        consts = {
            "BLOCK_T": block_t,
            "BLOCK_W": block_w,
            "BLOCK_K": mod.BLOCK_K,
            "GROUP_M": mod.GROUP_M,
            "NUM_PROGRAMS": 132,
            "SWAP_AB": swap_ab,
            "WARP_SPECIALIZE": ws,
            "FLATTEN": not ws,
        }
        for name in consts:
            sig[name] = "constexpr"
        attrs = {(i,): ALIGNED for i in (0, 1, 2, 4, 5)}  # M = 64 or 4096: not M = 257
        src = triton.compiler.ASTSource(fn, sig, constexprs=consts, attrs=attrs)
        tile = f"{block_t}x{block_w}x{mod.BLOCK_K}"
        label = f"gemm {dtype} swap_ab={swap_ab} tile={tile} st={stages} w={warps} ws={ws}"
        fails += not report(label, src, {"num_warps": warps, "num_stages": stages}, keep)
    return fails


def attention_gluon(keep: Path | None, sweep: bool) -> int:
    from triton.experimental.gluon._runtime import GluonASTSource

    mod = _load("attention_prefill_gluon")
    fn = mod._attention_forward
    fails = 0
    for head_dim in sorted(mod._TILES, reverse=True):
        block_n, stages = mod._TILES[head_dim]
        variants = [(block_n, stages)] + ([(64, 3), (128, 3)] if sweep and head_dim == 128 else [])
        for block_n, stages in variants:
            for causal in (False, True):
                sig = {
                    "q_ptr": "*bf16",
                    "k_ptr": "*bf16",
                    "v_ptr": "*bf16",
                    "o_ptr": "*bf16",
                    "qk_scale": "fp32",
                    "seq_len": "i32",
                    "q_heads": "i32",
                    "group": "i32",
                }
                consts = {"CAUSAL": causal, "HEAD_DIM": head_dim, "BLOCK_N": block_n, "NUM_STAGES": stages}
                for name in consts:
                    sig[name] = "constexpr"
                attrs = {(i,): ALIGNED for i in range(4)}
                src = GluonASTSource(fn, sig, constexprs=consts, attrs=attrs)
                label = f"attention_gluon D={head_dim} causal={causal} BLOCK_N={block_n} stages={stages}"
                fails += not report(label, src, {"num_warps": 4, "maxnreg": mod._LAUNCH_MAXNREG}, keep)
    return fails


def attention_varlen_gluon(keep: Path | None, sweep: bool) -> int:
    """The ragged prefill candidate's per-tile Gluon forward at its tiles, bf16, causal or not."""
    from triton.experimental.gluon._runtime import GluonASTSource

    mod = _load("attention_varlen_gluon")
    fn = mod._varlen_forward
    fails = 0
    for head_dim in sorted(mod._TILES, reverse=True):
        block_n, stages = mod._TILES[head_dim]
        for causal in (False, True):
            sig = {
                "q_ptr": "*bf16",
                "k_ptr": "*bf16",
                "v_ptr": "*bf16",
                "o_ptr": "*bf16",
                "cu_q_ptr": "*i32",
                "cu_k_ptr": "*i32",
                "tiles_ptr": "*i32",
                "n_slots": "i32",
                "qk_scale": "fp32",
                "q_heads": "i32",
                "group": "i32",
            }
            consts = {"CAUSAL": causal, "HEAD_DIM": head_dim, "BLOCK_N": block_n, "NUM_STAGES": stages}
            for name in consts:
                sig[name] = "constexpr"
            attrs = {(i,): ALIGNED for i in range(7)}
            src = GluonASTSource(fn, sig, constexprs=consts, attrs=attrs)
            label = f"attention_varlen_gluon D={head_dim} causal={causal} BLOCK_N={block_n} stages={stages}"
            fails += not report(label, src, {"num_warps": 4, "maxnreg": mod._LAUNCH_MAXNREG}, keep)
    return fails


def attention_varlen_persistent(keep: Path | None, sweep: bool) -> int:
    """The ragged prefill candidate's persistent Gluon forward (one program per SM walking the items)
    at its tiles, bf16, causal or not; ``--sweep`` adds its knobs' tiles and depths."""
    from triton.experimental.gluon._runtime import GluonASTSource

    mod = _load("attention_varlen_persistent")
    fn = mod._varlen_persistent
    fails = 0
    configs = [(d, *mod._TILES[d]) for d in sorted(mod._TILES, reverse=True)]
    if sweep:  # the knob values: the 64-key tile at D = 128, other depths at D = 64
        configs += [(128, 64, 2), (64, 64, 3), (64, 128, 2), (64, 128, 4)]
    for head_dim, block_n, stages in configs:
        for causal in (False, True):
            sig = {
                "q_ptr": "*bf16",
                "k_ptr": "*bf16",
                "v_ptr": "*bf16",
                "o_ptr": "*bf16",
                "tiles_ptr": "*i32",
                "n_slots": "i32",
                "qk_scale": "fp32",
                "q_heads": "i32",
                "group": "i32",
            }
            consts = {"CAUSAL": causal, "HEAD_DIM": head_dim, "BLOCK_N": block_n, "NUM_STAGES": stages}
            for name in consts:
                sig[name] = "constexpr"
            attrs = {(i,): ALIGNED for i in range(5)}
            src = GluonASTSource(fn, sig, constexprs=consts, attrs=attrs)
            label = (
                f"attention_varlen_persistent D={head_dim} causal={causal} BLOCK_N={block_n} stages={stages}"
            )
            fails += not report(label, src, {"num_warps": 4, "maxnreg": mod._LAUNCH_MAXNREG}, keep)
    return fails


def attention_persistent(keep: Path | None, sweep: bool) -> int:
    """The bundled kernel's persistent Gluon forward at its pinned tiles, bf16, host TMA descriptors
    over the flattened heads."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    mod = _load("attention_prefill_gluon")
    fn = mod._attention_persistent
    rows = mod.ROWS_PER_CONSUMER.value
    fails = 0
    for head_dim in sorted(mod._TILES, reverse=True):
        block_n, stages = mod._TILES[head_dim]
        q_layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], gl.bfloat16)
        kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, head_dim], gl.bfloat16)
        q_desc = f"tensordesc<bf16[{rows}, {head_dim}],{q_layout!r}>"
        kv_desc = f"tensordesc<bf16[{block_n}, {head_dim}],{kv_layout!r}>"
        for causal in (False, True):
            sig = {"q_desc": q_desc, "k_desc": kv_desc, "v_desc": kv_desc, "o_desc": q_desc}
            sig |= {
                "qk_scale": "fp32",
                "seq_len": "i32",
                "q_heads": "i32",
                "group": "i32",
                "num_tiles": "i32",
            }
            consts = {
                "CAUSAL": causal,
                "HEAD_DIM": head_dim,
                "BLOCK_N": block_n,
                "NUM_STAGES": stages,
                "HEAD_GROUP": mod.CAUSAL_HEAD_GROUP,
            }
            for name in consts:
                sig[name] = "constexpr"
            src = GluonASTSource(fn, sig, constexprs=consts, attrs={})
            label = f"attention_persistent D={head_dim} causal={causal} BLOCK_N={block_n} stages={stages}"
            fails += not report(label, src, {"num_warps": 4, "maxnreg": mod._LAUNCH_MAXNREG}, keep)
    return fails


def gdn_chunked(keep: Path | None, sweep: bool) -> int:
    """The three kernels at Dk = Dv = 128 in bf16, under the candidate's pins (and the sweep's
    chunk, value blocks and warps with ``--sweep``)."""
    mod = _load("gdn_chunked")
    dk = dv = 128
    base = (
        mod.CHUNK,
        mod.STATE_BLOCK_V,
        mod.OUTPUT_BLOCK_V,
        mod.PREPARE_WARPS,
        mod.STATE_WARPS,
        mod.OUTPUT_WARPS,
    )
    configs = [base]
    if sweep:
        configs += [(32, 32, 64, 8, 4, 4), (64, 64, 128, 4, 8, 8), (64, 16, 64, 8, 4, 4)]
    fails = 0
    for chunk, state_v, out_v, prep_w, state_w, out_w in configs:
        common = {"DK": dk, "DV": dv, "CHUNK": chunk, "PRECISION": "tf32"}
        kernels = [
            (
                mod._chunk_prepare,
                ["k_ptr", "v_ptr", "g_ptr:fp32", "beta_ptr:fp32", "gamma_ptr:fp32", "w_ptr", "u_ptr"],
                {
                    **common,
                    "DV_TILE": dv,
                    "LOG2_CHUNK": chunk.bit_length() - 1,
                    "SUB": min(chunk, mod.INVERSE_SUB),
                    "LOG2_SUB": min(chunk, mod.INVERSE_SUB).bit_length() - 1,
                    "INV_PRECISION": mod.INVERSE_PRECISION,
                },
                prep_w,
                1,
            ),
            (
                mod._chunk_state,
                ["k_ptr", "gamma_ptr:fp32", "w_ptr", "u_ptr", "vnew_ptr", "h_ptr", "n_chunks:i32"],
                {**common, "BLOCK_V": state_v, "STAGES": mod.STATE_STAGES},
                state_w,
                mod.STATE_STAGES,
            ),
            (
                mod._chunk_output,
                [
                    "q_ptr",
                    "k_ptr",
                    "gamma_ptr:fp32",
                    "vnew_ptr",
                    "h_ptr",
                    "o_ptr",
                    "n_chunks:i32",
                    "scale:fp32",
                ],
                {**common, "BLOCK_V": out_v},
                out_w,
                1,
            ),
        ]
        for fn, params, consts, warps, stages in kernels:
            sig: dict[str, str] = {}
            for p in params[: params.index("n_chunks:i32") if "n_chunks:i32" in params else len(params)]:
                name, _, ty = p.partition(":")
                sig[name] = f"*{ty or 'bf16'}"
            sig["seq_len"] = "i32"
            sig["n_heads"] = "i32"
            for p in params:
                name, _, ty = p.partition(":")
                if name not in sig:
                    sig[name] = ty
            for name in consts:
                sig[name] = "constexpr"
            attrs = {(i,): ALIGNED for i, ty in enumerate(sig.values()) if ty.startswith("*")}
            src = triton.compiler.ASTSource(fn, sig, constexprs=consts, attrs=attrs)
            label = f"gdn_chunked {fn.__name__} chunk={chunk} block_v={consts.get('BLOCK_V', dv)} w={warps}"
            fails += not report(label, src, {"num_warps": warps, "num_stages": stages}, keep)
    return fails


def _operand(dtype: str, tma: bool, rows: int, cols: int) -> str:
    """A kernel argument's type: a host TMA descriptor of that block, or a pointer."""
    return f"tensordesc<{dtype}[{rows}, {cols}]>" if tma else f"*{dtype}"


def gemm_pointer_tiles(keep: Path | None, sweep: bool) -> int:
    """The bundled GEMM's pointer-load kernel (``_matmul``) at the small-M tiles its pins choose:
    64 rows by 128, 64, 32 and 16 columns at their stages, bf16, M = 1 unaligned. ``--sweep`` adds
    the 16-column stages the gemm knob search times (4, 6, 8)."""
    mod = _load("gemm")
    tiles = [
        (mod.SINGLE_PTR_WIDE_BLOCK_N, mod.SINGLE_PTR_WIDE_STAGES),
        (mod.SINGLE_PTR_MID_BLOCK_N, mod.SINGLE_PTR_MID_STAGES),
        (mod.SINGLE_PTR_NARROW_BLOCK_N, mod.SINGLE_PTR_NARROW_STAGES),
        (mod.SINGLE_PTR_NARROWEST_BLOCK_N, mod.SINGLE_PTR_NARROWEST_STAGES),
    ]
    if sweep:
        tiles += [(mod.SINGLE_PTR_NARROWEST_BLOCK_N, st) for st in (4, 6, 12)]
    fails = 0
    for block_n, stages in tiles:
        sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32"}
        sig.update({s_: "i32" for s_ in ("stride_am", "stride_ak", "stride_bk", "stride_bn")})
        sig.update({s_: "i32" for s_ in ("stride_cm", "stride_cn")})
        consts = {
            "BLOCK_M": mod.DECODE_BLOCK_M,
            "BLOCK_N": block_n,
            "BLOCK_K": mod.BLOCK_K,
            "GROUP_M": mod.GROUP_M,
            "NUM_STAGES": stages,
        }
        for unit in ("stride_ak", "stride_bn", "stride_cn"):
            consts[unit] = 1
        for c_name in consts:
            sig[c_name] = "constexpr"
        names = list(sig)
        aligned = {"N", "K", "stride_am", "stride_bk", "stride_cm"}
        attrs = {(i,): ALIGNED for i, n_ in enumerate(names) if n_ in aligned or sig[n_].startswith("*")}
        src_ = triton.compiler.ASTSource(mod._matmul, sig, constexprs=consts, attrs=attrs)
        tile = f"{mod.DECODE_BLOCK_M}x{block_n}x{mod.BLOCK_K}"
        label = f"gemm pointer tile={tile} w={mod.DECODE_WARPS} st={stages}"
        fails += not report(label, src_, {"num_warps": mod.DECODE_WARPS, "num_stages": stages}, keep)
    return fails


def attention_decode_fused(keep: Path | None, sweep: bool) -> int:
    """The bundled one-launch paged decode (``_decode_fused``) at head dim 128, bf16, page 16, for
    GQA groups of 4 and 8 (Llama-3-8B, Qwen3-30B-A3B) at its pins. Nsight Compute on the H200 found
    it held to two programs per SM by registers (224 per thread); ``--sweep`` adds the register-
    cutting alternatives (fewer heads folded, a narrower combine tile, the 64-key tile, 2 stages),
    to see which reach 128 (four programs per SM) before a GPU sweep times them."""
    mod = _load("attention_decode")
    base = (mod.BLOCK_N_D128, mod.NUM_STAGES_D128, mod.FOLD_HEADS, mod.SPLIT_TILE)
    configs = [base]
    if sweep:
        configs += [(128, 3, 2, 16), (128, 3, 1, 16), (128, 3, 4, 8), (128, 2, 4, 16), (64, 3, 4, 16)]
        configs += [(128, 3, 2, 8), (128, 2, 2, 8), (64, 2, 1, 8)]
    sig = {
        "q_ptr": "*bf16",
        "k_ptr": "*bf16",
        "v_ptr": "*bf16",
        "table_ptr": "*i32",
        "lens_ptr": "*i32",
        "part_acc_ptr": "*fp32",
        "part_max_ptr": "*fp32",
        "part_sum_ptr": "*fp32",
        "count_ptr": "*i32",
        "o_ptr": "*bf16",
        "qk_scale": "fp32",
        "table_width": "i32",
        "max_splits": "i32",
        "ml_stride": "i32",
        "q_heads": "i32",
        "kv_heads": "i32",
    }
    names = list(sig)
    attrs = {(i,): ALIGNED for i, n_ in enumerate(names) if sig[n_].startswith("*") or n_ == "ml_stride"}
    fails = 0
    for group in (4, 8):
        for block_n, stages, fold, split_tile in configs:
            fold_heads = 1
            while fold_heads * 2 <= fold and group % (fold_heads * 2) == 0:
                fold_heads *= 2
            consts = {
                "GROUP": group,
                "GROUP_PAD": max(16, triton.next_power_of_2(group)),
                "FOLD_HEADS": fold_heads,
                "HEAD_DIM": 128,
                "PAGE": 16,
                "BLOCK_N": block_n,
                "SPLIT_TOKENS": mod.SPLIT_TOKENS_D128,
                "LONG_SPLIT_TOKENS": mod.SPLIT_TOKENS_D128,
                "LONG_FROM_TOKENS": mod.LONG_FROM_TOKENS_D128,
                "SPLIT_TILE": split_tile,
            }
            full = {**sig, **{c: "constexpr" for c in consts}}
            src_ = triton.compiler.ASTSource(mod._decode_fused, full, constexprs=consts, attrs=attrs)
            label = (
                f"attention_decode fused group={group} BLOCK_N={block_n} st={stages} "
                f"fold={fold_heads} split_tile={split_tile}"
            )
            options = {"num_warps": mod.NUM_WARPS_D128, "num_stages": stages}
            fails += not report(label, src_, options, keep)
    return fails


CHECKS = {
    "attention_tma_ws": attention_tma_ws,
    "gemm_persistent_tma": gemm_persistent_tma,
    "attention_gluon": attention_gluon,
    "attention_varlen_gluon": attention_varlen_gluon,
    "attention_varlen_persistent": attention_varlen_persistent,
    "attention_persistent": attention_persistent,
    "gdn_chunked": gdn_chunked,
    "gemm_pointer_tiles": gemm_pointer_tiles,
    "attention_decode_fused": attention_decode_fused,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", choices=sorted(CHECKS))
    ap.add_argument("--keep", type=Path, help="write each configuration's ttgir and ptx here")
    ap.add_argument("--sweep", action="store_true", help="also the alternatives the GPU sweep times")
    args = ap.parse_args()
    print(f"triton {triton.__version__}, torch {torch.__version__}, target sm_90a", flush=True)
    fails = sum(CHECKS[name](args.keep, args.sweep) for name in args.only or CHECKS)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
