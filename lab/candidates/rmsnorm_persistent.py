"""RMSNorm candidate: the bundled one-pass kernel, made persistent and pipelined across rows.

The bundled kernel (``nodice/kernels/rmsnorm.py``) launches one program per block of rows and
reaches 81–83 % of copy bandwidth at prefill, level with Liger. Each of its programs loads its rows,
reduces, stores and exits, so a program's load latency is only hidden by other programs on the SM.
Here a fixed number of programs per SM (``PROGRAMS_PER_SM``) walks the row blocks in a grid-stride
loop; ``tl.range(..., num_stages=STAGES)`` lets Triton issue the next block's loads while the
current one is reduced and stored, and the weight row is loaded once per program instead of once
per block. Loads and stores of ``x``/``y`` are marked evict-first (streamed once), the weight
evict-last.

Batch-invariant for the same reasons as the bundled kernel: the tile width, rows per block and warp
count come from the hidden size alone, and every row is reduced by the same ``tl.sum`` over the same
layout. The batch decides only how many blocks there are and so how many programs are launched
(at most ``PROGRAMS_PER_SM`` × SMs) and which program takes which block, never how a row is
computed.
"""

import torch
import triton
import triton.language as tl

MAX_ROW = 16384
# Rows per block so that a block holds at least this many elements.
ROW_ELEMENTS = 2048
# Warps per program, by the row tile's width (never by the batch).
WARPS_UP_TO_1K = 16
WARPS_2K = 8
WARPS_4K = 8
WARPS_8K = 16
WARPS_WIDER = 8
# Resident programs per SM and the depth of the row pipeline.
PROGRAMS_PER_SM = 4
STAGES = 2

# `nodice evolve TASK --agent knobs --seed lab/candidates/THIS_FILE` searches these (docs/search.md):
# row blocks, warps, resident programs and pipeline depth, each setting bit for bit against the
# best version before it is timed.
KNOBS = {
    "ROW_ELEMENTS": (2048, 8192),
    "PROGRAMS_PER_SM": (1, 2, 4, 8),
    "STAGES": (1, 2, 3),
}

_SM_COUNT: dict[int, int] = {}


@triton.jit
def _rmsnorm_persistent(
    x_ptr,
    w_ptr,
    y_ptr,
    n_rows,
    hidden,
    eps,
    ROWS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    STAGES: tl.constexpr,
):
    cols = tl.arange(0, BLOCK_H)
    col_ok = cols < hidden
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n_blocks = tl.cdiv(n_rows, ROWS)
    for block in tl.range(tl.program_id(0), n_blocks, tl.num_programs(0), num_stages=STAGES):
        rows = block * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & col_ok[None, :]
        offs = rows.to(tl.int64)[:, None] * hidden + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
        y = (x * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + offs, y, mask=mask, eviction_policy="evict_first")


@triton.jit
def _rmsnorm_row_looped(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _warps(block_h: int) -> int:
    if block_h <= 1024:
        return WARPS_UP_TO_1K
    if block_h <= 2048:
        return WARPS_2K
    if block_h <= 4096:
        return WARPS_4K
    if block_h <= 8192:
        return WARPS_8K
    return WARPS_WIDER


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: a few programs still exercise the grid-stride loop
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SM_COUNT:
        _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SM_COUNT[index]


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    block_h = triton.next_power_of_2(hidden)
    if block_h > MAX_ROW:
        _rmsnorm_row_looped[(batch,)](x, weight, y, hidden, eps, BLOCK_H=4096, num_warps=WARPS_WIDER)
        return y
    rows = max(1, ROW_ELEMENTS // block_h)
    # The grid is capped by the SM count: it decides which program takes which block, not the math.
    programs = max(1, min(triton.cdiv(batch, rows), PROGRAMS_PER_SM * _sm_count(x.device)))
    _rmsnorm_persistent[(programs,)](
        x, weight, y, batch, hidden, eps, ROWS=rows, BLOCK_H=block_h, STAGES=STAGES, num_warps=_warps(block_h)
    )
    return y
