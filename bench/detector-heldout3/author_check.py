"""Brute-force author oracle for the held-out batch-invariance pool.

Run (from the repository root):
    nice -n 10 env TRITON_INTERPRET=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        .venv/bin/python bench/detector-heldout3/author_check.py

Options: --only SUBSTRING (repeatable) to check a subset, --out PATH for the
labels file (default bench/detector-heldout3/labels.json; with --only the
default output is labels.partial.json so the full file is not clobbered).

Imports only torch, triton (through the candidates) and the standard library.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import importlib.util
import json
import sys
import time
import traceback

import torch

torch.set_num_threads(1)

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------------
# batch-size sweeps
SWEEP_FULL = list(range(1, 71)) + [127, 128, 129, 255, 256, 257]
SWEEP_STD = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 31, 32, 33, 47, 48, 49, 63, 64, 65, 70]
SWEEP_LIGHT = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65]
SWEEP_HEAVY = [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33]
SWEEP_TINY = [1, 2, 3, 4, 8, 9, 16, 17, 33]
SWEEPS = {"full": SWEEP_FULL, "std": SWEEP_STD, "light": SWEEP_LIGHT, "heavy": SWEEP_HEAVY, "tiny": SWEEP_TINY}
# the Triton interpreter is slow: Triton candidates use the next lighter sweep
TRITON_PROFILE = {"full": "std", "std": "light", "light": "heavy", "heavy": "tiny"}

# ----------------------------------------------------------------------------------
# problems: stem -> (level, cpu_batch_size, sweep profile, expected coupling or None)
PROBLEMS = {
    "level1_23_Softmax": (1, 8, "std", None),
    "level1_24_LogSoftmax": (1, 8, "std", None),
    "level1_36_RMSNorm_": (1, 2, "heavy", None),
    "level1_34_InstanceNorm": (1, 2, "heavy", None),
    "level1_35_GroupNorm_": (1, 2, "heavy", None),
    "level1_40_LayerNorm": (1, 2, "heavy", None),
    "level1_38_L1Norm_": (1, 16, "std", None),
    "level1_39_L2Norm_": (1, 16, "std", None),
    "level1_47_Sum_reduction_over_a_dimension": (1, 16, "std", None),
    "level1_48_Mean_reduction_over_a_dimension": (1, 16, "full", None),
    "level1_51_Argmax_over_a_dimension": (1, 16, "std", None),
    "level1_53_Min_reduction_over_a_dimension": (1, 16, "std", None),
    "level1_89_cumsum": (1, 16, "std", None),
    "level1_92_cumsum_exclusive": (1, 16, "std", None),
    "level1_88_MinGPTNewGelu": (1, 64, "full", None),
    "level1_3_Batched_matrix_multiplication": (1, 16, "std", None),
    "level1_50_conv_standard_2D__square_input__square_kernel": (1, 8, "light", None),
    "level2_37_Matmul_Swish_Sum_GroupNorm": (2, 16, "std", None),
    "level2_40_Matmul_Scaling_ResidualAdd": (2, 16, "light", None),
    "level2_45_Gemm_Sigmoid_LogSumExp": (2, 16, "light", None),
    "level2_14_Gemm_Divide_Sum_Scaling": (2, 16, "std", None),
    "level2_57_Conv2d_ReLU_HardSwish": (2, 4, "heavy", None),
    "level2_71_Conv2d_Divide_LeakyReLU": (2, 4, "heavy", None),
    "level2_92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp": (2, 4, "heavy", None),
    "level2_24_Conv3d_Min_Softmax": (2, 4, "heavy", None),
    # coupling problems (operator itself mixes samples)
    "level1_33_BatchNorm": (1, 2, None, "BatchNorm2d in training mode: per-channel mean/var over (N, H, W)"),
    "level1_37_FrobeniusNorm_": (1, 2, None, "torch.norm(x, p='fro') over the whole tensor, including dim 0"),
    "level1_94_MSELoss": (1, 16, None, "torch.mean over all elements, including dim 0 (scalar output)"),
    "level1_95_CrossEntropyLoss": (1, 16, None, "cross_entropy with reduction='mean' over the batch (scalar output)"),
    "level1_98_KLDivLoss": (1, 16, None, "kl_div reduction='batchmean': sum over all elements / batch size (scalar output)"),
    "level2_41_Gemm_BatchNorm_GELU_ReLU": (2, 16, None, "BatchNorm1d in training mode: per-feature mean/var over dim 0"),
    "level2_73_Conv2d_BatchNorm_Scaling": (2, 4, None, "BatchNorm2d in training mode: per-channel mean/var over (N, H, W)"),
    "level2_39_Gemm_Scale_BatchNorm": (2, 16, None, "BatchNorm1d in training mode: per-feature mean/var over dim 0"),
}

# ----------------------------------------------------------------------------------
# candidates: key -> (intended, mechanism, language, observable_on, description)
CPU = ["cpu", "cuda"]
CUDA = ["cuda"]
CANDIDATES = {
    # --- level 1 softmax family
    "level1_23_Softmax/triton_online_softmax": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row streams the row in fixed 32768-wide tiles (online max/sum, then a write pass); the batch only sets the grid."),
    "level1_23_Softmax/small_batch_column_split": (
        "violating", "split_count_from_batch", "pytorch", CPU,
        "When rows*splits < 64 each row is cut into 2..16 column segments whose partial max/sum-exp are merged; the segment count is derived from the batch size, so the per-row sum order changes with the batch."),
    "level1_23_Softmax/global_max_shift": (
        "violating", "cross_row_reduction", "pytorch", CPU,
        "Subtracts one scalar max of the whole batch instead of the per-row max before exp; each row's result depends on its batchmates' values."),
    "level1_23_Softmax/cuda_block_per_row": (
        "invariant", "per_row_block_fixed_threads", "cuda", CUDA,
        "load_inline CUDA kernel: one 1024-thread block per row, strided loop and fixed shared-memory tree reductions; the batch is only gridDim.x."),
    "level1_24_LogSoftmax/triton_split_row_lse_merge": (
        "violating", "split_count_from_batch", "triton", CPU,
        "Each row is split over SPLIT = 16 // rows Triton programs that compute partial (max, sum-exp); the partials are merged with a log-add-exp in PyTorch, so the merge (and rounding of the row's lse) depends on the batch size."),
    "level1_24_LogSoftmax/torch_stable_rowwise": (
        "invariant", "fixed_batch_chunks", "pytorch", CPU,
        "Max-shifted log-sum-exp per row in PyTorch; batches above 256 rows are processed in fixed 256-row chunks, which never splits a row."),
    # --- norms
    "level1_36_RMSNorm_/triton_rmsnorm_channels": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "Triton grid (batch, spatial tiles); each program loads all 64 channels for 4096 positions and reduces over channels; the batch is only a grid axis."),
    "level1_36_RMSNorm_/numel_switch_einsum": (
        "violating", "algorithm_from_numel", "pytorch", CPU,
        "When x.numel() > 2**24 (batch >= 5) the sum of squares is computed with einsum instead of mean(x**2); the two algorithms round differently, so a sample's output depends on the batch size."),
    "level1_36_RMSNorm_/cuda_per_position": (
        "invariant", "per_row_thread_loop", "cuda", CUDA,
        "load_inline CUDA kernel: one thread per (sample, position) loops sequentially over the channels; the batch only sets the number of blocks."),
    "level1_34_InstanceNorm/triton_instance_norm": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per (sample, channel) plane with fixed 65536-wide tiles for mean, variance and normalisation."),
    "level1_34_InstanceNorm/occupancy_split_hw": (
        "violating", "split_count_from_batch", "pytorch", CPU,
        "Each plane's reduction is split into 256 // (B*C) partial sums (4 at batch 1, 2 at batch 2, 1 from batch 4), so the per-plane sum order depends on the batch size."),
    "level1_35_GroupNorm_/triton_group_norm": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "Triton stats kernel with one program per (sample, group) and fixed tiles, then an elementwise apply kernel over the flat tensor."),
    "level1_35_GroupNorm_/plan_cache_by_batch": (
        "violating", "batch_keyed_plan_cache", "pytorch", CPU,
        "A plan cache keyed by (batch, group size) stores how many partial reductions each group uses (more for small batches); the cached split count changes the per-group sum order."),
    "level1_40_LayerNorm/per_sample_small_batch": (
        "invariant", "identical_branches", "pytorch", CPU,
        "Batches of <= 4 are normalised sample by sample with F.layer_norm, larger batches in one call; both paths reduce each sample identically."),
    "level1_40_LayerNorm/triton_split_stats_by_batch": (
        "violating", "split_count_from_batch", "triton", CPU,
        "Per-row statistics are split over SPLIT = 64 // rows programs whose partial sums are added afterwards; the split count comes from the batch size."),
    "level1_38_L1Norm_/triton_l1_rowwise": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row with a fixed 16384-wide tile loop for the abs-sum and the scaling pass."),
    "level1_38_L1Norm_/small_batch_vector_norm": (
        "violating", "small_batch_fast_path", "pytorch", CPU,
        "Batches of <= 8 rows use torch.linalg.vector_norm(ord=1) for the denominator, larger ones mean(abs(x)); the two reductions round differently."),
    "level1_39_L2Norm_/triton_split_by_batch": (
        "violating", "split_count_from_batch", "triton", CPU,
        "Sum of squares split over SPLIT = min(16, 132 // rows) programs per row with partials summed afterwards; the split count depends on the batch size."),
    "level1_39_L2Norm_/fixed_row_chunks": (
        "invariant", "fixed_batch_chunks", "pytorch", CPU,
        "Rows are processed in fixed 1024-row chunks; each row's sum of squares is a plain per-row reduction inside one chunk."),
    # --- reductions
    "level1_47_Sum_reduction_over_a_dimension/triton_fixed_tiles": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "Triton grid (batch, column tiles); every program reduces all 256 rows of its sample in fixed 32-row steps."),
    "level1_47_Sum_reduction_over_a_dimension/triton_atomic_splitk": (
        "violating", "atomic_split_from_batch", "triton", CPU,
        "The reduced dimension is split into 8 (batch < 8), 2 (batch < 32) or 1 slab(s), each atomically added into the output; the split count depends on the batch."),
    "level1_47_Sum_reduction_over_a_dimension/cuda_atomic_split": (
        "violating", "atomic_split_from_batch", "cuda", CUDA,
        "load_inline CUDA kernel that splits the reduced dimension into 1000 // (B * col_blocks) slabs (capped at 32) combined with float atomicAdd; split count follows the batch and atomics add in arbitrary order."),
    "level1_48_Mean_reduction_over_a_dimension/fixed_batch_chunks": (
        "invariant", "fixed_batch_chunks", "pytorch", CPU,
        "Batches >= 32 are reduced in fixed 4-sample chunks, smaller ones in one call; the reduction over dim 1 is per sample either way."),
    "level1_48_Mean_reduction_over_a_dimension/half_input_large_batch": (
        "violating", "lower_precision_when_large", "pytorch", CPU,
        "When numel >= 2**21 (batch >= 32) the input is cast to float16 before the fp32-accumulated mean, so the same sample rounds differently in a big batch."),
    "level1_48_Mean_reduction_over_a_dimension/cuda_warp_or_thread_by_batch": (
        "violating", "algorithm_from_numel", "cuda", CUDA,
        "load_inline CUDA kernel: when B*C < 16384 outputs (batch < 64) each output is reduced by a warp (lane-strided partials + shuffle tree), otherwise by one thread summing sequentially; the reduction order depends on the batch size."),
    "level1_51_Argmax_over_a_dimension/triton_split_argmax": (
        "invariant", "exact_reduction_split_by_batch", "triton", CPU,
        "Argmax split over 64 // B row slabs, partial (max, first index) pairs combined exactly; max/argmax are order independent so the batch-dependent split cannot change bits."),
    "level1_51_Argmax_over_a_dimension/transpose_fast_path": (
        "invariant", "identical_branches", "pytorch", CPU,
        "Batches < 16 transpose the reduced dim innermost and use max().indices, larger ones torch.argmax; both are exact, so both paths return the same indices."),
    "level1_53_Min_reduction_over_a_dimension/triton_split_min": (
        "invariant", "exact_reduction_split_by_batch", "triton", CPU,
        "Min over dim 1 split into up to 8 slabs chosen from the batch size, partial minima combined with amin; min is exact so the split count is harmless."),
    "level1_53_Min_reduction_over_a_dimension/half_precision_large_batch": (
        "violating", "lower_precision_when_large", "pytorch", CPU,
        "Batches >= 32 take the min of a float16 copy of the input, so results are rounded to half precision only in big batches."),
    "level1_89_cumsum/triton_blocked_scan": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row scans fixed 4096-element blocks with a running carry."),
    "level1_89_cumsum/segmented_scan_small_batch": (
        "violating", "split_count_from_batch", "pytorch", CPU,
        "Rows are cut into segments while rows*segments < 64; each segment is scanned locally and offset by a scan of segment totals, so the addition order depends on the batch size."),
    "level1_92_cumsum_exclusive/shift_and_scan": (
        "invariant", "plain_per_row", "pytorch", CPU,
        "Exclusive scan as an inclusive torch.cumsum of the right-shifted row; purely per-row."),
    "level1_92_cumsum_exclusive/triton_block_by_batch": (
        "violating", "block_size_from_batch", "triton", CPU,
        "Per-row Triton scan with tile width 1024 when rows >= 32 and 8192 otherwise; the carry is accumulated per tile, so the rounding depends on the batch."),
    "level1_88_MinGPTNewGelu/triton_gelu_tanh": (
        "invariant", "elementwise_grid_from_numel", "triton", CPU,
        "Elementwise Triton tanh-GELU over the flat tensor; the batch only changes the number of 8192-element programs."),
    "level1_88_MinGPTNewGelu/fp16_large_batch": (
        "violating", "lower_precision_when_large", "pytorch", CPU,
        "When numel >= 2**18 (batch >= 32) the GELU is evaluated in float16 and cast back."),
    "level1_88_MinGPTNewGelu/per_row_small_batch": (
        "invariant", "identical_branches", "pytorch", CPU,
        "Batches <= 16 loop over rows, larger ones run the same elementwise formula on the whole tensor; elementwise math is identical in both paths."),
    "level1_3_Batched_matrix_multiplication/triton_bmm_fixed_tiles": (
        "invariant", "fixed_tile_gemm", "triton", CPU,
        "Triton bmm with fixed 128x256x128 tiles and one K loop order; the batch is a grid axis."),
    "level1_3_Batched_matrix_multiplication/splitk_small_batch": (
        "violating", "split_k_from_batch", "pytorch", CPU,
        "For batch < 16 the K dimension is split into 4 chunks accumulated with baddbmm; otherwise one bmm. Split-K changes the summation order."),
    "level1_3_Batched_matrix_multiplication/tf32_switch_large_batch": (
        "violating", "backend_precision_switch_by_batch", "pytorch", CUDA,
        "Sets torch.backends.cuda.matmul.allow_tf32 = (batch >= 32) before torch.bmm; on a GPU big batches run in TF32 (and cuBLAS bmm itself already differed at batch 2 on an H100). On CPU the flag has no effect and bmm is batch invariant."),
    "level1_50_conv_standard_2D__square_input__square_kernel/torch_conv_functional": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "Calls F.conv2d with the module's weight/bias; on CPU this convolution gives the same bits for a sample at any batch size."),
    "level1_50_conv_standard_2D__square_input__square_kernel/im2col_small_batch": (
        "violating", "small_batch_fast_path", "pytorch", CPU,
        "Batches <= 2 use unfold + matmul (im2col GEMM) instead of the convolution, which reduces in a different order."),
    # --- level 2 GEMM
    "level2_37_Matmul_Swish_Sum_GroupNorm/triton_gemm_swish_epilogue": (
        "invariant", "fixed_tile_gemm", "triton", CPU,
        "Triton GEMM with fixed 64x512x512 tiles fused with swish and bias; GroupNorm as per-row reductions over contiguous 64-feature groups."),
    "level2_37_Matmul_Swish_Sum_GroupNorm/addmm_fused_epilogue": (
        "violating", "library_gemm_shape_heuristic", "pytorch", CPU,
        "torch.addmm for the GEMM then silu/bias/group_norm; the vendor GEMM picks its kernel (gemv at M=1, different blocking for other M), so a row's bits depend on the batch size."),
    "level2_40_Matmul_Scaling_ResidualAdd/triton_splitk_small_m": (
        "violating", "split_k_from_batch", "triton", CPU,
        "Triton GEMM with split-K = max(1, 16 // output_tiles): split-K 2 while batch <= 32 (8 tiles), none above; the partials are summed afterwards, so the K order depends on the batch."),
    "level2_40_Matmul_Scaling_ResidualAdd/triton_fixed_tiles": (
        "invariant", "fixed_tile_gemm", "triton", CPU,
        "Triton GEMM with fixed 64x512x512 tiles and fused bias/scale/residual; the batch only sets the M grid."),
    "level2_40_Matmul_Scaling_ResidualAdd/per_sample_gemv": (
        "invariant", "per_row_loop", "pytorch", CPU,
        "Loops over samples calling F.linear on a 1-row slice, so every sample always takes the same (M=1) GEMM path."),
    "level2_45_Gemm_Sigmoid_LogSumExp/bf16_second_gemm_large_batch": (
        "violating", "lower_precision_when_large", "pytorch", CPU,
        "Two addmm GEMMs with sigmoid and a logsumexp; when the batch is >= 32 the second GEMM runs in bfloat16 ('tensor cores pay off'), so a sample's result depends on the batch size. (On CPU the fp32 addmm path is itself M-dependent, so differences already appear at batch 2.)"),
    "level2_45_Gemm_Sigmoid_LogSumExp/triton_two_gemms": (
        "invariant", "fixed_tile_gemm", "triton", CPU,
        "Two fixed-tile Triton GEMMs (sigmoid fused into the first) and a one-program-per-row logsumexp."),
    "level2_14_Gemm_Divide_Sum_Scaling/collapsed_weight_rowdot": (
        "invariant", "algebraic_rewrite_per_row", "pytorch", CPU,
        "Collapses GEMM+sum into x . W.sum(0), computed as an elementwise product and a per-row sum."),
    "level2_14_Gemm_Divide_Sum_Scaling/collapsed_splitk_by_batch": (
        "violating", "split_count_from_batch", "pytorch", CPU,
        "Same rewrite, but each row's dot product is split into chunks while B*splits < 64; the chunk count comes from the batch."),
    # --- level 2 conv
    "level2_57_Conv2d_ReLU_HardSwish/triton_fused_epilogue": (
        "invariant", "elementwise_grid_from_numel", "triton", CPU,
        "PyTorch conv2d followed by an elementwise Triton ReLU+HardSwish kernel over the flat output."),
    "level2_57_Conv2d_ReLU_HardSwish/channel_split_small_batch": (
        "violating", "split_k_from_batch", "pytorch", CPU,
        "For batch < 8 the input-channel reduction is split into two half convolutions that are added; otherwise one convolution."),
    "level2_71_Conv2d_Divide_LeakyReLU/triton_reciprocal_branch": (
        "invariant", "identical_branches", "triton", CPU,
        "Triton epilogue multiplies by 1/divisor for batch >= 16 and divides otherwise; with divisor 2 both are exact and bit-identical."),
    "level2_71_Conv2d_Divide_LeakyReLU/fp64_small_batch": (
        "violating", "precision_from_batch", "pytorch", CPU,
        "Batches <= 2 run the convolution in float64 and cast back, larger ones in float32."),
    "level2_92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp/triton_fused_tail": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "PyTorch conv + GroupNorm, then a Triton kernel per (sample, spatial tile) fusing tanh, hardswish, residual add and the channel logsumexp."),
    "level2_92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp/manual_gn_partial_sums": (
        "violating", "split_count_from_batch", "pytorch", CPU,
        "Hand-written GroupNorm whose per-group sums use 256 // (B*G) partial sums (16 at batch 1, 1 from batch 16)."),
    "level2_24_Conv3d_Min_Softmax/torch_min_softmax": (
        "violating", "library_conv_shape_heuristic", "pytorch", CPU,
        "Plain nn.Conv3d then amin over depth and softmax; the CPU conv3d takes a different path for a single sample than for a batch, so batch-1 bits differ."),
    "level2_24_Conv3d_Min_Softmax/per_sample_conv_triton_tail": (
        "invariant", "per_row_loop", "triton", CPU,
        "Convolves each sample separately (always the batch-1 path) and fuses min-over-depth and channel softmax in a Triton kernel per (sample, spatial tile)."),
    # --- added for balance (Triton violating / PyTorch invariant)
    "level1_89_cumsum/triton_config_cache_by_batch": (
        "violating", "batch_keyed_plan_cache", "triton", CPU,
        "Per-row Triton scan whose tile width comes from a config cache keyed by (rows, cols) and filled by a cost model that prefers wide tiles for small batches; the tile width changes the carry rounding."),
    "level1_88_MinGPTNewGelu/triton_tanh_form_by_numel": (
        "violating", "algorithm_from_numel", "triton", CPU,
        "Elementwise Triton GELU that evaluates tanh as 2*sigmoid(2u)-1 when numel < 2**18 and as (e^2u-1)/(e^2u+1) otherwise (batch >= 32); the two forms round differently."),
    "level2_37_Matmul_Swish_Sum_GroupNorm/triton_tile_config_by_m": (
        "violating", "tile_config_from_batch", "triton", CPU,
        "Triton GEMM+swish whose (BM, BN, BK) comes from a table keyed by M (BK 1024 for M <= 16, 512 up to 64, 256 above); the K-tile size changes the accumulation order."),
    "level1_38_L1Norm_/triton_flat_block_partials": (
        "violating", "position_dependent_partition", "triton", CPU,
        "Abs-sum over flat 16384-element blocks of the whole tensor; a block straddling a row boundary atomically adds one partial per row. Row r starts at r*65535, so the partition of a row into partials depends on its position in the batch."),
    "level2_92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp/torch_functional_chain": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "F.conv2d, F.group_norm, tanh, hardswish, residual add and a max-shifted channel logsumexp, all per-sample operations."),
    "level1_36_RMSNorm_/torch_rsqrt_inplace": (
        "invariant", "plain_per_row", "pytorch", CPU,
        "mean(x*x) over channels per sample, then x * rsqrt(ms + eps); no batch-dependent choices."),
    "level2_57_Conv2d_ReLU_HardSwish/torch_functional_hardswish": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "nn.Conv2d, in-place ReLU and F.hardswish; per-sample library ops only."),
    # --- coupling problems
    "level1_33_BatchNorm/triton_batchnorm_train": (
        "not_applicable", "coupling_batch_statistics", "triton", CPU,
        "Triton training-mode BatchNorm: per-channel statistics over (N, H, W), running-stat update, affine apply."),
    "level1_37_FrobeniusNorm_/sumsq_rsqrt": (
        "not_applicable", "coupling_global_norm", "pytorch", CPU,
        "x * rsqrt(sum(x*x)) with the sum over the whole tensor, batch included."),
    "level1_94_MSELoss/triton_partial_sums": (
        "not_applicable", "coupling_loss_over_batch", "triton", CPU,
        "Triton block partial sums of squared differences over the flattened tensors, then a mean: a scalar over the batch."),
    "level1_95_CrossEntropyLoss/logsumexp_gather": (
        "not_applicable", "coupling_loss_over_batch", "pytorch", CPU,
        "Per-row logsumexp minus the target logit, averaged over the batch."),
    "level1_98_KLDivLoss/fused_xlogy": (
        "not_applicable", "coupling_loss_over_batch", "pytorch", CPU,
        "sum(t*log t - t*log p) / batch: a scalar over the batch."),
    "level2_41_Gemm_BatchNorm_GELU_ReLU/addmm_bn_train": (
        "not_applicable", "coupling_batch_statistics", "pytorch", CPU,
        "addmm GEMM then F.batch_norm in training mode (batch statistics) then gelu/relu."),
    "level2_73_Conv2d_BatchNorm_Scaling/triton_bn_scale": (
        "not_applicable", "coupling_batch_statistics", "triton", CPU,
        "conv2d then Triton per-channel sums over (N, H, W), running-stat update and a fused affine*scale kernel."),
    "level2_39_Gemm_Scale_BatchNorm/folded_scale_batch_stats": (
        "not_applicable", "coupling_batch_statistics", "pytorch", CPU,
        "addmm GEMM times scale, then hand-written training-mode BatchNorm with mean/var over dim 0."),
}

CANDIDATE_TIME_BUDGET_S = 25.0


# ----------------------------------------------------------------------------------
def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_counter = [0]


def load_problem(stem):
    _counter[0] += 1
    return load_module(os.path.join(HERE, "problems", stem + ".py"), f"heldout3_problem_{_counter[0]}")


def inputs_at(prob, batch, seed):
    prob.batch_size = batch
    torch.manual_seed(seed)
    return list(prob.get_inputs())


def build(cls, prob):
    torch.manual_seed(42)
    return cls(*prob.get_init_inputs())


def as_tensor_out(out):
    if isinstance(out, (tuple, list)):
        out = out[0]
    return out


def place(batch_inputs, target_inputs, pos):
    for b, t in zip(batch_inputs, target_inputs):
        if isinstance(b, torch.Tensor) and b.dim() >= 1:
            b[pos] = t[0]
    return batch_inputs


def run(model, ins):
    with torch.no_grad():
        return as_tensor_out(model(*ins))


def to_double(ins):
    return [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in ins]


def first_diff(a, b):
    if a.shape != b.shape:
        return {"shape_solo": list(a.shape), "shape_batched": list(b.shape)}
    shape = tuple(a.shape)
    a = a.reshape(-1)
    b = b.reshape(-1)
    ne = (a != b)
    if a.is_floating_point():
        ne = ne & ~(torch.isnan(a) & torch.isnan(b))
    flat = ne.nonzero().flatten()
    if flat.numel() == 0:
        return None
    i = int(flat[0])
    multi, rem = [], i
    for dim in reversed(shape):
        multi.append(rem % dim)
        rem //= dim
    d = {"first_diff_index": list(reversed(multi)), "n_diff": int(ne.sum())}
    if a.is_floating_point():
        d.update(solo_value=float(a[i]), batched_value=float(b[i]),
                 max_abs_diff=float((a.double() - b.double()).abs().max()))
    else:
        d.update(solo_value=int(a[i]), batched_value=int(b[i]))
    return d


# ----------------------------------------------------------------------------------
def operator_check(stem):
    """Run the reference Model in float64 on targets alone and inside batches."""
    prob = load_problem(stem)
    model = build(prob.Model, prob).double()
    worst = (0.0, None)
    targets = [to_double(inputs_at(prob, 1, 1000 + i)) for i in range(3)]
    try:
        solo = [run(model, t) for t in targets]
    except Exception as e:  # e.g. BatchNorm1d in training mode refuses a batch of one
        msg = "".join(traceback.format_exception_only(type(e), e)).strip()[-300:]
        # compare the target at position 0 of two batches of 2 with different batchmates
        outs = []
        for seed in (21, 22):
            batch = to_double(inputs_at(prob, 2, seed))
            place(batch, targets[0], 0)
            outs.append(run(model, batch))
        diff = float((outs[0][0] - outs[1][0]).abs().max()) if outs[0].dim() else float("inf")
        return {"coupled": diff > 1e-9 * max(1.0, float(outs[0].abs().max())),
                "how": f"reference raises at batch 1 ({msg}); with two different batchmates the target's "
                       f"float64 output differs by {diff:.3g}",
                "float64_max_abs_diff": diff, "batch_size": 2, "position": 0}
    for B, seed in ((2, 11), (3, 12), (5, 13), (8, 14)):
        batch = to_double(inputs_at(prob, B, seed))
        positions = []
        for pos in (0, B // 2, B - 1):
            if pos not in positions:
                positions.append(pos)
        for ti, pos in enumerate(positions):
            place(batch, targets[ti], pos)
        out = run(model, batch)
        if out.dim() == 0 or out.shape[0] != B:
            return {"coupled": True, "how": f"output shape {list(out.shape)} has no per-sample batch axis",
                    "batch_size": B}
        for ti, pos in enumerate(positions):
            ref = solo[ti][0]
            got = out[pos]
            if ref.shape != got.shape:
                return {"coupled": True, "how": "per-sample output shape changes with batch", "batch_size": B}
            if not ref.is_floating_point():
                diff = float((ref != got).any())
            else:
                diff = float((ref - got).abs().max())
            scale = float(ref.abs().max()) if ref.is_floating_point() else 1.0
            if diff > worst[0]:
                worst = (diff, {"batch_size": B, "position": pos, "target": ti})
            if diff > 1e-9 * max(1.0, scale):
                return {"coupled": True, "how": "target output changes with batchmates (float64)",
                        "float64_max_abs_diff": diff, "batch_size": B, "position": pos}
    return {"coupled": False, "float64_worst_abs_diff": worst[0], "at": worst[1]}


def correctness(stem, cand_path, cpu_bs):
    prob = load_problem(stem)
    model = build(prob.Model, prob)
    cmod = load_module(cand_path, "cand_" + os.path.basename(cand_path)[:-3] + f"_{_counter[0]}")
    new = build(cmod.ModelNew, prob)
    ins = inputs_at(prob, cpu_bs, 7)
    ref = run(model, [t.clone() if isinstance(t, torch.Tensor) else t for t in ins])
    got = run(new, [t.clone() if isinstance(t, torch.Tensor) else t for t in ins])
    if ref.shape != got.shape:
        return False, {"reason": f"shape {list(got.shape)} vs {list(ref.shape)}"}
    ok = torch.allclose(got.to(ref.dtype) if ref.is_floating_point() else got, ref, atol=1e-2, rtol=1e-2)
    err = float((got.double() - ref.double()).abs().max())
    return bool(ok), {"max_abs_err_vs_reference": err, "batch_size": cpu_bs}


def bi_sweep(stem, cand_path, sizes, budget_s):
    prob = load_problem(stem)
    cmod = load_module(cand_path, "candsweep_" + os.path.basename(cand_path)[:-3] + f"_{_counter[0]}")
    new = build(cmod.ModelNew, prob)
    targets = [inputs_at(prob, 1, 2000 + i) for i in range(3)]
    solo = [run(new, [t.clone() for t in tg]) for tg in targets]
    # run-to-run determinism at batch 1
    again = run(new, [t.clone() for t in targets[0]])
    d = first_diff(solo[0], again)
    if d is not None:
        d.update(batch_size=1, position=0, context="run-to-run repeat at batch 1")
        return "violating", d
    t0 = time.time()
    tried = []
    comparisons = 0
    plan = []
    for B in sizes:
        if B == 1:
            continue
        plan.append((B, 3000 + B))
    # a second set of batchmates at a few sizes, target at other positions
    for B in (4, 9, 17):
        if B in sizes:
            plan.append((B, 5000 + B))
    for B, seed in plan:
        if time.time() - t0 > budget_s:
            break
        batch = inputs_at(prob, B, seed)
        if seed >= 5000:
            positions = [1, B - 2, B // 3]
        else:
            positions = [0, B // 2, B - 1] if B >= 3 else [0, 1]
        used = []
        for ti, pos in enumerate(positions):
            if pos in [u for _, u in used]:
                continue
            place(batch, targets[ti], pos)
            used.append((ti, pos))
        out = run(new, batch)
        tried.append(B)
        for ti, pos in used:
            comparisons += 1
            d = first_diff(solo[ti][0], out[pos])
            if d is not None:
                d.update(batch_size=B, position=pos, target=ti, batchmates_seed=seed,
                         context=f"target {ti} alone (batch 1) vs at position {pos} of batch {B}",
                         sizes_tried=len(tried))
                return "violating", d
    return "invariant", {"sweep_batch_sizes": sorted(set(tried) | {1}), "comparisons": comparisons,
                         "positions": "first/middle/last, plus a second batchmate set at other positions",
                         "sweep_seconds": round(time.time() - t0, 1)}


# ----------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out_path = args.out or os.path.join(HERE, "labels.partial.json" if args.only else "labels.json")

    t_start = time.time()
    results = []
    gpu_path = os.path.join(HERE, "gpu_cuda_results.json")
    gpu = {}
    if os.path.exists(gpu_path):  # written by gpu_check_cuda.py on an H100 (optional confirmation)
        with open(gpu_path) as f:
            gpu = {r["key"]: r for r in json.load(f)}
    op_cache = {}
    for key, (intended, mech, lang, obs, desc) in CANDIDATES.items():
        if args.only and not any(s in key for s in args.only):
            continue
        stem, name = key.split("/")
        level, cpu_bs, profile, coupling = PROBLEMS[stem]
        cand_path = os.path.join(HERE, "pool", stem, name + ".py")
        t0 = time.time()
        rec = {"key": key, "problem": f"problems/{stem}.py", "level": level, "intended": intended,
               "label_cpu": None, "mechanism": mech, "language": lang, "description": desc,
               "observable_on": obs, "cpu_batch_size": cpu_bs, "evidence": {}, "correct": None}
        try:
            if stem not in op_cache:
                op_cache[stem] = operator_check(stem)
            op = op_cache[stem]
            if "cpu" not in obs and lang == "cuda":
                rec["label_cpu"] = "excluded"
                rec["evidence"] = {"reason": "native CUDA extension (load_inline); cannot be built or run on CPU. "
                                             "Expected verdict assigned by reasoning about the kernel.",
                                   "expected_on_cuda": intended, "labelled_by": "reasoning"}
                rec["correct"] = True
                rec["evidence"]["correct_by"] = "reasoning (same math as the reference in fp32)"
                if op["coupled"]:
                    rec["label_cpu"] = "not_applicable"
            else:
                ok, cinfo = correctness(stem, cand_path, cpu_bs)
                rec["correct"] = ok
                rec["evidence"]["correctness"] = cinfo
                if op["coupled"]:
                    rec["label_cpu"] = "not_applicable"
                    rec["evidence"]["coupling"] = coupling
                    rec["evidence"]["operator_check"] = op
                else:
                    rec["evidence"]["operator_check"] = op
                    prof = TRITON_PROFILE[profile] if lang == "triton" else profile
                    label, ev = bi_sweep(stem, cand_path, SWEEPS[prof], CANDIDATE_TIME_BUDGET_S)
                    rec["evidence"]["sweep"] = ev
                    if "cpu" not in obs:
                        rec["label_cpu"] = "excluded"
                        rec["evidence"]["reason"] = ("intended behaviour needs CUDA (backend flag has no effect on CPU); "
                                                     f"CPU sweep result: {label}")
                    else:
                        rec["label_cpu"] = label
        except Exception as e:  # keep going; record the failure
            rec["label_cpu"] = "error"
            rec["evidence"]["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-800:]
            traceback.print_exc()
        if key in gpu:
            g = gpu[key]
            rec["evidence"]["gpu_confirmation"] = {k: g.get(k) for k in ("device", "gpu_label", "correct",
                                                                           "max_abs_err", "evidence")}
        rec["evidence"]["seconds"] = round(time.time() - t0, 1)
        agree = rec["label_cpu"] == intended or rec["label_cpu"] == "excluded"
        print(f"{time.time() - t_start:7.1f}s {rec['evidence']['seconds']:6.1f}s {key:85s} "
              f"intended={intended:14s} label={rec['label_cpu']:14s} correct={rec['correct']}"
              f"{'' if agree else '   <-- MISMATCH'}", flush=True)
        results.append(rec)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {len(results)} records to {out_path} in {time.time() - t_start:.1f}s")


if __name__ == "__main__":
    main()
