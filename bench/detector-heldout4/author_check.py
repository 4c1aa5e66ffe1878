"""Brute-force author oracle for the held-out batch-invariance pool.

Run (from the repository root):
    nice -n 10 env TRITON_INTERPRET=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        .venv/bin/python bench/detector-heldout4/author_check.py

Options: --only SUBSTRING (repeatable) to check a subset, --out PATH for the
labels file (default bench/detector-heldout4/labels.json; with --only the
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
BN1D = "BatchNorm1d in training mode: per-feature mean/var over dim 0"
BN3D = "BatchNorm3d in training mode: per-channel mean/var over (N, D, H, W)"
PROBLEMS = {
    "level1_21_Sigmoid": (1, 16, "std", None),
    "level1_26_GELU_": (1, 16, "std", None),
    "level1_29_Softplus": (1, 16, "std", None),
    "level1_30_Softsign": (1, 16, "std", None),
    "level1_90_cumprod": (1, 16, "full", None),
    "level1_91_cumsum_reverse": (1, 16, "full", None),
    "level1_93_masked_cumsum": (1, 16, "full", None),
    "level1_83_conv_depthwise_2D_square_input_asymmetric_kernel": (1, 4, "heavy", None),
    "level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp": (2, 8, "light", None),
    "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish": (2, 8, "light", None),
    "level2_30_Gemm_GroupNorm_Hardtanh": (2, 8, "light", None),
    "level2_62_Matmul_GroupNorm_LeakyReLU_Sum": (2, 8, "light", None),
    "level2_99_Matmul_GELU_Softmax": (2, 8, "light", None),
    "level2_86_Matmul_Divide_GELU": (2, 8, "light", None),
    "level2_98_Matmul_AvgPool_GELU_Scale_Max": (2, 8, "light", None),
    "level2_64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU": (2, 8, "light", None),
    "level2_23_Conv3d_GroupNorm_Mean": (2, 4, "heavy", None),
    "level2_27_Conv3d_HardSwish_GroupNorm_Mean": (2, 4, "heavy", None),
    "level2_85_Conv2d_GroupNorm_Scale_MaxPool_Clamp": (2, 4, "heavy", None),
    "level2_67_Conv2d_GELU_GlobalAvgPool": (2, 4, "heavy", None),
    "level2_6_Conv3d_Softmax_MaxPool_MaxPool": (2, 4, "heavy", None),
    "level2_79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max": (2, 4, "heavy", None),
    "level2_69_Conv2d_HardSwish_ReLU": (2, 4, "heavy", None),
    "level2_21_Conv2d_Add_Scale_Sigmoid_GroupNorm": (2, 4, "heavy", None),
    # coupling problems (the operator itself mixes samples)
    "level1_96_HuberLoss": (1, 16, None, "smooth_l1_loss with reduction='mean' over all elements, batch included (scalar output)"),
    "level1_99_TripletMarginLoss": (1, 16, None, "TripletMarginLoss with reduction='mean' over the batch (scalar output)"),
    "level2_72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool": (2, 4, None, BN3D),
    "level2_15_ConvTranspose3d_BatchNorm_Subtract": (2, 4, None, BN3D),
    "level2_33_Gemm_Scale_BatchNorm": (2, 8, None, BN1D),
    "level2_84_Gemm_BatchNorm_Scaling_Softmax": (2, 8, None, BN1D),
    "level2_97_Matmul_BatchNorm_BiasAdd_Divide_Swish": (2, 8, None, BN1D),
    "level2_11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm": (2, 4, None, "BatchNorm2d in training mode: per-channel mean/var over (N, H, W)"),
}

# ----------------------------------------------------------------------------------
# candidates: key -> (intended, mechanism, language, observable_on, description)
CPU = ["cpu", "cuda"]
CUDA = ["cuda"]
NA = "not_applicable"
CANDIDATES = {
    # --- level1_21_Sigmoid
    "level1_21_Sigmoid/triton_flat_block": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "Flat elementwise Triton sigmoid with a fixed 16384-element block; the batch only changes the grid size."),
    "level1_21_Sigmoid/half_precision_large_batch": (
        "violating", "precision_by_batch", "pytorch", CPU,
        "Computes the sigmoid in fp16 when the batch is 8 or more, in fp32 below."),
    "level1_21_Sigmoid/triton_rows_block_by_batch": (
        "invariant", "elementwise_tile_by_batch", "triton", CPU,
        "Row-by-column-tile Triton sigmoid whose column tile width is chosen from the batch size; each element is computed alone, so the tile does not change any value."),
    # --- level1_26_GELU_
    "level1_26_GELU_/triton_erf": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "Flat Triton erf-GELU with a fixed block; no batch-dependent choice."),
    "level1_26_GELU_/tanh_approx_large_inputs": (
        "violating", "algorithm_by_numel", "pytorch", CPU,
        "Switches from the exact erf GELU to the tanh approximation once the tensor has 2^22 elements or more (batch 11 and up here)."),
    "level1_26_GELU_/fixed_row_chunks": (
        "invariant", "fixed_batch_chunking", "pytorch", CPU,
        "F.gelu applied to fixed chunks of 4 rows written into a preallocated output."),
    # --- level1_29_Softplus
    "level1_29_Softplus/triton_stable": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "Flat Triton softplus in the stable max(x,0)+log(1+exp(-|x|)) form with a fixed block."),
    "level1_29_Softplus/triton_exp2_fastpath_by_batch": (
        "violating", "algorithm_by_batch", "triton", CPU,
        "Triton softplus that uses an exp2/log2 formulation when the batch is 8 or more and exp/log below."),
    "level1_29_Softplus/cuda_fast_math_large_batch": (
        "violating", "fast_math_by_batch", "cuda", CUDA,
        "load_inline CUDA softplus that switches to the __expf/__logf intrinsics when the batch is 64 or more."),
    # --- level1_30_Softsign
    "level1_30_Softsign/reciprocal_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "x * reciprocal(1+|x|) for batches of 8 or more, x / (1+|x|) below."),
    "level1_30_Softsign/inplace_abs_add": (
        "invariant", "plain_elementwise", "pytorch", CPU,
        "abs, in-place add of 1 and one division; no batch-dependent choice."),
    "level1_30_Softsign/cuda_vectorized_float4": (
        "invariant", "batch_only_in_grid", "cuda", CUDA,
        "load_inline CUDA softsign with float4 vector loads, a grid-stride loop and a scalar tail; each element is computed alone."),
    # --- level1_90_cumprod
    "level1_90_cumprod/segmented_scan_by_batch": (
        "violating", "segmented_scan_by_batch", "pytorch", CPU,
        "Two-level cumprod (local scans in segments, then exclusive carry products) with 32-element segments for batch <= 4 and 256 above."),
    "level1_90_cumprod/triton_whole_row_scan": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row scanning the whole row with tl.associative_scan; the block is the row length."),
    "level1_90_cumprod/log_cumsum_exp": (
        "invariant", "algebraic_rewrite_per_row", "pytorch", CPU,
        "exp(cumsum(log x)) along the row; every step is per row."),
    # --- level1_91_cumsum_reverse
    "level1_91_cumsum_reverse/triton_reverse_row_scan": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row that loads the row back to front, runs tl.cumsum, and stores it back to front."),
    "level1_91_cumsum_reverse/total_minus_cumsum": (
        "invariant", "algebraic_rewrite_per_row", "pytorch", CPU,
        "Suffix sums as total - prefix + x from one forward cumsum per row."),
    "level1_91_cumsum_reverse/segment_split_by_batch": (
        "violating", "segmented_scan_by_batch", "pytorch", CPU,
        "Splits each row into 32 >> bit_length(B) segments (32 at batch 1, 1 from batch 32), scans segments and adds the totals of the segments to the right."),
    # --- level1_93_masked_cumsum
    "level1_93_masked_cumsum/triton_masked_row_scan": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "One Triton program per row: where(mask, x, 0) then tl.cumsum over the whole row."),
    "level1_93_masked_cumsum/matmul_scan_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "Scan as a GEMM with a triangular ones matrix over 256-element tiles plus carried tile totals for batch > 4, torch.cumsum below."),
    "level1_93_masked_cumsum/cuda_blocks_per_row_by_batch": (
        "violating", "scan_tiles_by_batch", "cuda", CUDA,
        "load_inline CUDA two-pass tiled scan whose tiles per row are 264 / rows (capped at 64), so the carry-add grouping depends on the batch."),
    # --- level1_83 depthwise
    "level1_83_conv_depthwise_2D_square_input_asymmetric_kernel/shifted_sum": (
        "invariant", "plain_per_sample", "pytorch", CPU,
        "The (3,1) depthwise conv as a weighted sum of three row-shifted views, in fixed tap order."),
    "level1_83_conv_depthwise_2D_square_input_asymmetric_kernel/triton_depthwise_fixed_block": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "Triton depthwise conv, one program per (sample, channel, 65536-pixel block), taps accumulated in fixed order."),
    "level1_83_conv_depthwise_2D_square_input_asymmetric_kernel/half_precision_large_batch": (
        "violating", "precision_by_batch", "pytorch", CPU,
        "Shifted-sum depthwise conv computed in fp16 for batches of 4 or more, fp32 below."),
    # --- level2_18
    "level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp/folded_weight_rowdot": (
        "invariant", "algebraic_rewrite_per_row", "pytorch", CPU,
        "Folds GEMM + row sum into x . colsum(W) + sum(b), reduced per row with (x * w).sum(1)."),
    "level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp/triton_folded_splitk_by_batch": (
        "violating", "splitk_atomics_by_batch", "triton", CPU,
        "Folded GEMV in Triton with K split 8 ways (float atomic adds) for batch < 16 and unsplit above."),
    "level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp/addmm_then_reduce": (
        "violating", "library_gemm_shape_dependent", "pytorch", CPU,
        "torch.addmm on the whole batch then a row sum; the BLAS GEMM gives a sample different bits at batch 1 than inside a batch."),
    # --- level2_22
    "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish/padded_tile_gemm_epilogue": (
        "invariant", "fixed_padded_tiles", "pytorch", CPU,
        "GEMM on fixed zero-padded 16-row tiles (every GEMM call has the same shape), then a per-row epilogue."),
    "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish/bf16_gemv_small_batch": (
        "violating", "precision_by_batch", "pytorch", CPU,
        "Per-row GEMV with bfloat16 weights for batch < 8, fp32 padded 16-row tile GEMM from 8 on."),
    "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish/addmm_fused_epilogue": (
        "violating", "library_gemm_shape_dependent", "pytorch", CPU,
        "torch.addmm on the whole batch with the scale folded into alpha/beta, then the epilogue. Written as a library-GEMM violation, but the oracle labels it invariant on CPU: the row logsumexp (output ~19, clamped inputs) absorbs the last-bit GEMM differences, so label_cpu (invariant) is kept."),
    # --- level2_30
    "level2_30_Gemm_GroupNorm_Hardtanh/padded_gemm_triton_groupnorm": (
        "invariant", "fixed_padded_tiles", "triton", CPU,
        "Padded 16-row tile GEMM, then a Triton GroupNorm+hardtanh kernel with one program per (row, group)."),
    "level2_30_Gemm_GroupNorm_Hardtanh/rowwise_gemm_chunked_stats_by_batch": (
        "violating", "split_reduction_by_batch", "pytorch", CPU,
        "Per-row GEMV, then GroupNorm statistics summed in 8 chunks per group for batch < 8 and in one pass above."),
    # --- level2_62
    "level2_62_Matmul_GroupNorm_LeakyReLU_Sum/padded_gemm_groupnorm": (
        "invariant", "fixed_padded_tiles", "pytorch", CPU,
        "Padded 16-row tile GEMM, nn.GroupNorm, leaky_relu and x*2."),
    "level2_62_Matmul_GroupNorm_LeakyReLU_Sum/onepass_var_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "Per-row GEMV, then one-pass E[x^2]-E[x]^2 GroupNorm for batch >= 8 and library group_norm below."),
    # --- level2_99
    "level2_99_Matmul_GELU_Softmax/rowwise_gemv_triton_softmax": (
        "invariant", "per_row_program_fixed_block", "triton", CPU,
        "Per-sample GEMV, then one Triton program per row fusing GELU and a whole-row softmax."),
    "level2_99_Matmul_GELU_Softmax/online_softmax_block_by_batch": (
        "violating", "block_size_by_batch", "triton", CPU,
        "Padded-tile GEMM, then a Triton online softmax whose column block is 1024 for batch >= 8 and 8192 (one block) below."),
    "level2_99_Matmul_GELU_Softmax/linear_gelu_softmax": (
        "violating", "library_gemm_shape_dependent", "pytorch", CPU,
        "torch.addmm on the whole batch, GELU, exp(x - max) / sum."),
    # --- level2_86
    "level2_86_Matmul_Divide_GELU/rowwise_folded_divisor": (
        "invariant", "per_sample_gemv", "pytorch", CPU,
        "Divisor folded into W and b, one GEMV per sample, GELU."),
    "level2_86_Matmul_Divide_GELU/splitk_small_batch": (
        "violating", "splitk_by_batch", "pytorch", CPU,
        "Two-half split-K per-row GEMV for batch < 8, padded 16-row tile GEMM from 8 on."),
    # --- level2_98
    "level2_98_Matmul_AvgPool_GELU_Scale_Max/folded_pool_weight_rowwise": (
        "invariant", "per_sample_gemv", "pytorch", CPU,
        "AvgPool folded into a 16x smaller weight, one GEMV per sample, GELU, scale, row max."),
    "level2_98_Matmul_AvgPool_GELU_Scale_Max/padded_gemm_max_split_by_batch": (
        "invariant", "exact_reduction_split_by_batch", "pytorch", CPU,
        "Padded 16-row tile GEMM, avg-pool, GELU, scale, then a row max over 64 // B column chunks; max is exact, so the split does not change bits."),
    "level2_98_Matmul_AvgPool_GELU_Scale_Max/addmm_pool_library": (
        "violating", "library_gemm_shape_dependent", "pytorch", CPU,
        "torch.addmm on the whole batch, pool as reshape + mean, GELU, scale, max."),
    # --- level2_64
    "level2_64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU/padded_gemm_epilogue": (
        "invariant", "fixed_padded_tiles", "pytorch", CPU,
        "Padded 16-row tile GEMM, logsumexp, merged leaky_relus, two GELUs."),
    "level2_64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU/bf16_gemm_large_batch": (
        "violating", "precision_by_batch", "pytorch", CPU,
        "bfloat16 GEMM for batch >= 8, fp32 per-row GEMV below; fp32 epilogue."),
    # --- level2_23
    "level2_23_Conv3d_GroupNorm_Mean/per_sample_conv_triton_gn_mean": (
        "invariant", "per_sample_library_call", "triton", CPU,
        "conv3d one sample at a time, Triton group statistics with a fixed block, closed-form mean of the normalized output."),
    "level2_23_Conv3d_GroupNorm_Mean/conv_groupnorm_mean": (
        "violating", "library_conv_shape_dependent", "pytorch", CPU,
        "Batched F.conv3d, F.group_norm and a mean; the library conv3d takes a different path at batch 1."),
    "level2_23_Conv3d_GroupNorm_Mean/per_sample_conv_chunked_stats_by_batch": (
        "violating", "split_reduction_by_batch", "pytorch", CPU,
        "Per-sample conv3d; GroupNorm statistics summed in 16 spatial chunks for batch < 4 and in one pass above."),
    # --- level2_27
    "level2_27_Conv3d_HardSwish_GroupNorm_Mean/torch_functional": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv3d, hardswish, group_norm and a spatial mean, all on the whole batch."),
    "level2_27_Conv3d_HardSwish_GroupNorm_Mean/triton_gn_stats_split_by_batch": (
        "violating", "splitk_atomics_by_batch", "triton", CPU,
        "Triton GroupNorm statistics split into max(1, 32 // (B*G)) partials per group combined with float atomics."),
    # --- level2_85
    "level2_85_Conv2d_GroupNorm_Scale_MaxPool_Clamp/torch_functional": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv2d, group_norm with the scale folded into its affine parameters, max pool, clamp."),
    "level2_85_Conv2d_GroupNorm_Scale_MaxPool_Clamp/triton_gn_scale_fixed_block": (
        "invariant", "per_group_program_fixed_block", "triton", CPU,
        "conv2d, then a Triton GroupNorm+scale kernel with one program per (sample, group) and a fixed block; max pool, clamp."),
    "level2_85_Conv2d_GroupNorm_Scale_MaxPool_Clamp/onepass_stats_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "One-pass E[x^2]-E[x]^2 GroupNorm statistics for batch >= 4, library group_norm below."),
    # --- level2_67
    "level2_67_Conv2d_GELU_GlobalAvgPool/conv_gelu_mean": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv2d, GELU and a mean over H, W."),
    "level2_67_Conv2d_GELU_GlobalAvgPool/spatial_split_pool_by_batch": (
        "violating", "split_reduction_by_batch", "pytorch", CPU,
        "Global average pool as partial sums over 8 spatial slabs for batch < 4 (1 slab above), then a sum of partials."),
    # --- level2_6
    "level2_6_Conv3d_Softmax_MaxPool_MaxPool/torch_softmax_pool4": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv3d, channel softmax and one 4x max pool in place of two 2x pools. Written as invariant, but the oracle labels it violating on CPU: the batched library conv3d (3 -> 16 channels, k = 3) gives a sample different bits at batch 1 than inside a batch, so label_cpu (violating) is kept."),
    "level2_6_Conv3d_Softmax_MaxPool_MaxPool/per_sample_conv_softmax_pool": (
        "invariant", "per_sample_library_call", "pytorch", CPU,
        "conv3d, channel softmax and the two max pools run one sample at a time."),
    "level2_6_Conv3d_Softmax_MaxPool_MaxPool/triton_channel_softmax": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "conv3d, a Triton channel softmax over (channels x 4096-voxel) tiles, then the two max pools. Written as invariant (the Triton kernel is), but the oracle labels it violating on CPU because the batched library conv3d already differs at batch 2; label_cpu (violating) is kept."),
    "level2_6_Conv3d_Softmax_MaxPool_MaxPool/logsumexp_softmax_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "Softmax as exp(x - logsumexp(x)) for batch >= 4, torch.softmax below (on CPU the batched library conv3d already differs at batch 2, before this switch)."),
    # --- level2_79
    "level2_79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max/torch_functional": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv3d, multiply, instance_norm, clamp, multiply and a channel max on the whole batch. Written as invariant, but the oracle labels it violating on CPU: the batched library conv3d gives a sample different bits at batch 1 than inside a batch, so label_cpu (violating) is kept."),
    "level2_79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max/per_sample_fused": (
        "invariant", "per_sample_library_call", "pytorch", CPU,
        "The whole conv3d / instance-norm / clamp / channel-max chain run one sample at a time."),
    "level2_79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max/onepass_instnorm_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "One-pass E[x^2]-E[x]^2 instance-norm statistics for batch >= 4, library instance_norm below (on CPU the batched library conv3d already differs at batch 2, before this switch)."),
    # --- level2_69
    "level2_69_Conv2d_HardSwish_ReLU/conv_triton_epilogue": (
        "invariant", "batch_only_in_grid", "triton", CPU,
        "conv2d, then a flat Triton hardswish+relu kernel with a fixed block."),
    "level2_69_Conv2d_HardSwish_ReLU/im2col_gemm_large_batch": (
        "violating", "algorithm_by_batch", "pytorch", CPU,
        "unfold (im2col) + one addmm over all output pixels for batch >= 4, conv2d below."),
    "level2_69_Conv2d_HardSwish_ReLU/conv_clamp_form": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv2d, then x * clamp(x + 3, 0, 6) / 6 and clamp_min(0)."),
    # --- level2_21
    "level2_21_Conv2d_Add_Scale_Sigmoid_GroupNorm/torch_functional": (
        "invariant", "plain_library_op", "pytorch", CPU,
        "conv2d, (x + b) * s, sigmoid, nn.GroupNorm."),
    "level2_21_Conv2d_Add_Scale_Sigmoid_GroupNorm/triton_gn_split_by_batch": (
        "violating", "splitk_atomics_by_batch", "triton", CPU,
        "Triton GroupNorm statistics split into max(1, 64 // (B*G)) partials per group combined with float atomics."),
    # --- coupling problems
    "level1_96_HuberLoss/where_mean": (
        NA, "coupling_loss_over_batch", "pytorch", CPU,
        "smooth_l1 written with torch.where, then a mean over all elements: a scalar over the batch."),
    "level1_96_HuberLoss/triton_block_partials": (
        NA, "coupling_loss_over_batch", "triton", CPU,
        "Triton block partial sums of the Huber terms over the flattened tensors, then a sum / numel: a scalar over the batch."),
    "level1_99_TripletMarginLoss/rowwise_norms": (
        NA, "coupling_loss_over_batch", "pytorch", CPU,
        "Row distances with vector_norm(a - p + eps), hinge, mean over the batch."),
    "level1_99_TripletMarginLoss/triton_row_distances": (
        NA, "coupling_loss_over_batch", "triton", CPU,
        "One Triton program per row for both distances and the hinge, then a mean over the batch."),
    "level2_72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool/bn_train_pool4": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "conv_transpose3d, F.batch_norm in training mode, one 4x average pool."),
    "level2_72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool/triton_bn_stats": (
        NA, "coupling_batch_statistics", "triton", CPU,
        "conv_transpose3d, Triton per-channel sums over (N, D, H, W), running-stat update, affine, 4x average pool."),
    "level2_15_ConvTranspose3d_BatchNorm_Subtract/bn_train_centered": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "conv_transpose3d, batch var over (N, D, H, W), (y - spatial mean) * gamma * rstd."),
    "level2_33_Gemm_Scale_BatchNorm/addmm_bn_train": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "addmm, scale, F.batch_norm in training mode."),
    "level2_33_Gemm_Scale_BatchNorm/padded_gemm_manual_bn": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Padded 16-row tile GEMM, scale, hand-written training-mode BatchNorm over dim 0."),
    "level2_84_Gemm_BatchNorm_Scaling_Softmax/bn_train_scaled_softmax": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "addmm, training-mode batch_norm with the scale folded into its affine parameters, softmax."),
    "level2_97_Matmul_BatchNorm_BiasAdd_Divide_Swish/triton_bn_swish_epilogue": (
        NA, "coupling_batch_statistics", "triton", CPU,
        "addmm, then a Triton kernel per feature block computing batch statistics over dim 0, affine, bias, divide, swish."),
    "level2_11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm/torch_functional_bn_train": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "conv_transpose2d, training-mode batch_norm, tanh, max pool, group_norm."),
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
    return load_module(os.path.join(HERE, "problems", stem + ".py"), f"heldout4_problem_{_counter[0]}")


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
                rec["label_cpu"] = "cuda_only"
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
                        rec["label_cpu"] = "cuda_only"
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
        agree = rec["label_cpu"] == intended or rec["label_cpu"] == "cuda_only"
        print(f"{time.time() - t_start:7.1f}s {rec['evidence']['seconds']:6.1f}s {key:85s} "
              f"intended={intended:14s} label={rec['label_cpu']:14s} correct={rec['correct']}"
              f"{'' if agree else '   <-- MISMATCH'}", flush=True)
        results.append(rec)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {len(results)} records to {out_path} in {time.time() - t_start:.1f}s")


if __name__ == "__main__":
    main()
