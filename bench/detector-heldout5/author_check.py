"""Brute-force author oracle for the held-out batch-invariance pool detector-heldout5.

Adapted from bench/detector-heldout4/author_check.py (same method). Run from the repository root:
    nice -n 10 env TRITON_INTERPRET=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        .venv/bin/python bench/detector-heldout5/author_check.py --jobs 2

Options: --only SUBSTRING (repeatable) to check a subset, --out PATH for the labels file
(default bench/detector-heldout5/labels.json; with --only the default output is
labels.partial.json), --jobs N worker processes (one candidate per task).

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
from concurrent.futures import ProcessPoolExecutor

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
BN = "BatchNorm{d} in training mode: per-channel mean/var over {axes}"
NETVLAD = ("BatchNorm1d in training mode over all B*N descriptor rows (x.view(-1, D) @ clusters), "
           "so the cluster assignments of a sample depend on its batchmates")
PROBLEMS = {
    "level1_19_ReLU": (1, 16, "std", None),
    "level1_20_LeakyReLU": (1, 16, "std", None),
    "level1_22_Tanh": (1, 16, "std", None),
    "level1_25_Swish": (1, 16, "std", None),
    "level1_27_SELU_": (1, 16, "std", None),
    "level1_28_HardSigmoid": (1, 16, "std", None),
    "level1_31_ELU": (1, 16, "std", None),
    "level1_32_HardTanh": (1, 16, "std", None),
    "level2_51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd": (2, 8, "light", None),
    "level2_12_Gemm_Multiply_LeakyReLU": (2, 8, "light", None),
    "level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply": (2, 8, "light", None),
    "level2_29_Matmul_Mish_Mish": (2, 8, "light", None),
    "level2_53_Gemm_Scaling_Hardtanh_GELU": (2, 8, "light", None),
    "level2_63_Gemm_ReLU_Divide": (2, 8, "light", None),
    "level2_70_Gemm_Sigmoid_Scaling_ResidualAdd": (2, 8, "light", None),
    "level2_76_Gemm_Add_ReLU": (2, 8, "light", None),
    "level2_81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": (2, 8, "light", None),
    "level2_88_Gemm_GroupNorm_Swish_Multiply_Swish": (2, 8, "light", None),
    "level2_94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm": (2, 8, "light", None),
    "level2_95_Matmul_Add_Swish_Tanh_GELU_Hardtanh": (2, 8, "light", None),
    "level2_48_Conv3d_Scaling_Tanh_Multiply_Sigmoid": (2, 4, "heavy", None),
    "level2_50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling": (2, 4, "heavy", None),
    "level2_58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp": (2, 4, "heavy", None),
    "level2_60_ConvTranspose3d_Swish_GroupNorm_HardSwish": (2, 4, "heavy", None),
    "level2_89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max": (2, 4, "heavy", None),
    "level2_96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp": (2, 4, "heavy", None),
    # coupling problems (the operator itself mixes samples)
    "level1_97_CosineSimilarityLoss": (1, 16, None, "mean over the batch of 1 - cosine_similarity (scalar output)"),
    "level1_100_HingeLoss": (1, 16, None, "mean over all elements, batch included, of clamp(1 - p*t, 0) (scalar output)"),
    "level2_52_Conv2d_Activation_BatchNorm": (2, 8, None, BN.format(d="2d", axes="(N, H, W)")),
    "level2_77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool": (2, 4, None, BN.format(d="3d", axes="(N, D, H, W)")),
    "level3_46_NetVladWithGhostClusters": (3, 8, None, NETVLAD),
    "level3_47_NetVladNoGhostClusters": (3, 8, None, NETVLAD),
}

# ----------------------------------------------------------------------------------
# candidates: key -> (intended, mechanism, language, observable_on, description)
CPU = ["cpu", "cuda"]
CUDA = ["cuda"]
NA = "not_applicable"
INV = "invariant"
VIO = "violating"
CANDIDATES = {
    # --- level 1 elementwise
    "level1_19_ReLU/triton_relu_block_by_batch": (
        INV, "elementwise_tile_by_batch", "triton", CPU,
        "Flat Triton ReLU whose block is 65536 for batches of 32 or more and 16384 below; each element is computed alone."),
    "level1_19_ReLU/bf16_storage_large_tensor": (
        VIO, "precision_by_numel", "pytorch", CPU,
        "ReLU on a bfloat16 copy once the tensor has 2^22 elements or more (batch 11 and up), fp32 below."),
    "level1_19_ReLU/cuda_relu_vec4": (
        INV, "batch_only_in_grid", "cuda", CUDA,
        "load_inline CUDA ReLU with float4 loads, a grid-stride loop and a scalar tail."),
    "level1_20_LeakyReLU/where_or_functional_by_batch": (
        INV, "equivalent_algorithms_by_batch", "pytorch", CPU,
        "F.leaky_relu for batches of 8 or more, torch.where(x > 0, x, x * slope) below; both round x * slope once, so the bits agree."),
    "level1_20_LeakyReLU/triton_leaky_rows": (
        INV, "batch_only_in_grid", "triton", CPU,
        "Triton leaky ReLU on a (row, 32768-column block) grid; the batch only sets the grid."),
    "level1_22_Tanh/sigmoid_identity_large_batch": (
        VIO, "algorithm_by_batch", "pytorch", CPU,
        "2 * sigmoid(2x) - 1 for batches of 8 or more, torch.tanh below."),
    "level1_22_Tanh/triton_tanh_exp_form": (
        INV, "batch_only_in_grid", "triton", CPU,
        "Flat Triton tanh as sign(x) (1 - e) / (1 + e), e = exp(-2|x|), fixed block."),
    "level1_22_Tanh/cuda_fast_tanh_by_batch": (
        VIO, "fast_math_by_batch", "cuda", CUDA,
        "load_inline CUDA tanh that switches from tanhf to __expf/__fdividef when the batch is 256 or more."),
    "level1_25_Swish/exp_form_large_numel": (
        VIO, "algorithm_by_numel", "pytorch", CPU,
        "x / (1 + exp(-x)) once the tensor has more than 2^23 elements (batch 22 and up), x * sigmoid(x) below."),
    "level1_25_Swish/fixed_chunks_inplace": (
        INV, "fixed_batch_chunking", "pytorch", CPU,
        "x * sigmoid(x) on fixed chunks of 3 rows written into a preallocated output."),
    "level1_25_Swish/triton_reciprocal_mul_by_batch": (
        VIO, "algorithm_by_batch", "triton", CPU,
        "Flat Triton swish computing x * (1 / (1 + exp(-x))) for batches of 16 or more and x / (1 + exp(-x)) below (constexpr switch)."),
    "level1_27_SELU_/per_tensor_fp16_scaled": (
        VIO, "batch_wide_quantization_scale", "pytorch", CPU,
        "Scales the whole tensor by its absolute max, rounds to fp16, scales back, then SELU: the scale (and so the rounding) comes from the whole batch."),
    "level1_27_SELU_/manual_selu_constants": (
        INV, "plain_elementwise", "pytorch", CPU,
        "scale * (clamp_min(x, 0) + alpha * expm1(clamp_max(x, 0))) with the SELU constants written out."),
    "level1_27_SELU_/sorted_rows_by_norm": (
        INV, "batch_permutation_per_sample_ops", "pytorch", CPU,
        "Rows are visited in order of their L1 norm (a batch-wide argsort) but each row is computed alone by torch.selu and written back to its own position."),
    "level1_28_HardSigmoid/mul_add_form_by_batch": (
        VIO, "algorithm_by_batch", "pytorch", CPU,
        "clamp(x * (1/6) + 0.5, 0, 1) for batches of 4 or more, F.hardsigmoid ((x + 3) / 6) below."),
    "level1_28_HardSigmoid/triton_hardsigmoid": (
        INV, "elementwise_tile_by_batch", "triton", CPU,
        "Flat Triton hardsigmoid (x + 3) / 6 clamped, with the block sized from the number of programs (16 or 64, chosen by batch)."),
    "level1_31_ELU/tf32_truncation_large_batch": (
        VIO, "emulated_reduced_precision_by_batch", "pytorch", CPU,
        "For batches of 16 or more the input mantissa is truncated to 10 bits (TF32-style bit mask) before F.elu."),
    "level1_31_ELU/triton_elu": (
        INV, "batch_only_in_grid", "triton", CPU,
        "Flat Triton ELU, alpha * (exp(min(x, 0)) - 1) on the negative side, fixed block."),
    "level1_31_ELU/batch_fast_path_all_positive": (
        INV, "batch_predicate_exact_paths", "pytorch", CPU,
        "A batch-wide predicate (no negative element anywhere) picks an identity fast path, else F.elu; both paths give the same bits for every element."),
    "level1_32_HardTanh/minmax_or_clamp_by_batch": (
        INV, "equivalent_algorithms_by_batch", "pytorch", CPU,
        "torch.clamp for batches of 16 or more, clone + clamp_min_ + clamp_max_ below; both are exact, so the bits agree."),
    "level1_32_HardTanh/bf16_large_batch": (
        VIO, "precision_by_batch", "pytorch", CPU,
        "F.hardtanh on a bfloat16 copy for batches of 32 or more, fp32 below."),
    # --- level 2 GEMM problems
    "level2_51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd/folded_mean_weight_rowdot": (
        INV, "algebraic_rewrite_per_row", "pytorch", CPU,
        "GEMM + subtract + mean folded into x . colmean(W) + mean(b - s), reduced per row with (x * w).sum(1); logsumexp of one element dropped; GELU + residual. Written as an invariant per-row rewrite, but the oracle labels it violating on CPU: torch.sum(dim=1) over a (B, 8192) tensor gives a row different bits at batch 1 than at position 1 of a batch of 2, so label_cpu (violating) is kept."),
    "level2_51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd/per_sample_dot_folded": (
        INV, "per_sample_gemv", "pytorch", CPU,
        "Same folding (x . colmean(W) + mean(b - s)), but one torch.dot per sample, then GELU + residual."),
    "level2_51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd/triton_folded_rowdot_blockk_by_batch": (
        VIO, "block_k_by_batch", "triton", CPU,
        "Folded GEMV in Triton, one program per row, with a vector accumulator over K blocks of 2048 for batches below 4 and 1024 from 4 on (the accumulation grouping changes), fused GELU + residual."),
    "level2_12_Gemm_Multiply_LeakyReLU/padded16_tile_gemm": (
        INV, "fixed_padded_tiles", "pytorch", CPU,
        "GEMM on fixed zero-padded 16-row tiles (every F.linear call has the same shape), then scale and leaky ReLU."),
    "level2_12_Gemm_Multiply_LeakyReLU/pow2_padded_gemm": (
        VIO, "padding_to_batch_dependent_shape", "pytorch", CPU,
        "Pads the batch to the next power of two before one F.linear, so the GEMM shape still follows the batch."),
    "level2_12_Gemm_Multiply_LeakyReLU/triton_fp16_intermediate_large_batch": (
        VIO, "precision_by_batch", "triton", CPU,
        "Padded-tile GEMM, then a Triton epilogue that rounds the GEMM output through fp16 for batches of 16 or more."),
    "level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply/per_sample_gemv_rownorm": (
        INV, "per_sample_gemv", "pytorch", CPU,
        "One addmv per sample, row var_mean instance norm, residual add and multiply."),
    "level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply/triton_rownorm_partials_by_batch": (
        VIO, "split_reduction_by_batch", "triton", CPU,
        "Padded-tile GEMM, then Triton per-row partial sums (16 partials per row for batch < 8, 4 from 8 on) for the instance-norm mean and variance."),
    "level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply/float64_stats_small_batch": (
        VIO, "precision_upcast_by_batch", "pytorch", CPU,
        "Per-sample GEMV; instance-norm statistics and normalisation in float64 for batches below 4 and in fp32 from 4 on."),
    "level2_29_Matmul_Mish_Mish/per_sample_gemv_mish": (
        INV, "per_sample_gemv", "pytorch", CPU,
        "One addmv per sample followed by mish(mish(.))."),
    "level2_29_Matmul_Mish_Mish/splitk_chunks_by_batch": (
        VIO, "splitk_by_batch", "pytorch", CPU,
        "Per-row split-K GEMV with 1 K-chunk at batch 1, 2 below 8 and 4 from 8 on."),
    "level2_53_Gemm_Scaling_Hardtanh_GELU/fixed4_row_chunks": (
        INV, "fixed_padded_tiles", "pytorch", CPU,
        "GEMM on fixed zero-padded 4-row chunks, then scale, hardtanh and GELU."),
    "level2_53_Gemm_Scaling_Hardtanh_GELU/tanh_gelu_large_batch": (
        VIO, "algorithm_by_batch", "pytorch", CPU,
        "Padded 16-row tile GEMM, hardtanh, then the tanh-approximate GELU for batches of 16 or more and the exact erf GELU below."),
    "level2_63_Gemm_ReLU_Divide/folded_divisor_padded_tiles": (
        INV, "fixed_padded_tiles", "pytorch", CPU,
        "Divisor folded into W and b, GEMM on fixed zero-padded 16-row tiles, ReLU."),
    "level2_63_Gemm_ReLU_Divide/addmm_relu_inplace": (
        VIO, "library_gemm_shape_dependent", "pytorch", CPU,
        "One torch.addmm on the whole batch with in-place relu_ and div_; the BLAS GEMM gives a row different bits at batch 1 than inside a batch."),
    "level2_70_Gemm_Sigmoid_Scaling_ResidualAdd/padded_tiles_triton_epilogue": (
        INV, "fixed_padded_tiles", "triton", CPU,
        "Padded 16-row tile GEMM, then a flat Triton sigmoid * scale + residual epilogue."),
    "level2_70_Gemm_Sigmoid_Scaling_ResidualAdd/batch_centered_gemm": (
        VIO, "batch_statistic_in_algebraic_rewrite", "pytorch", CPU,
        "W x + b rewritten as W (x - mu) + (W mu + b) with mu the mean of x over the batch: exact algebra, but the rounding depends on the batchmates."),
    "level2_76_Gemm_Add_ReLU/triton_gemm_fixed_blocks": (
        INV, "batch_only_in_grid", "triton", CPU,
        "Triton tl.dot GEMM with fixed 64x1024x512 blocks (rows past the batch masked to zero) and a fused bias + ReLU epilogue."),
    "level2_76_Gemm_Add_ReLU/tf32_emulation_by_batch": (
        VIO, "emulated_reduced_precision_by_batch", "pytorch", CPU,
        "For batches of 8 or more x and W are truncated to 10 mantissa bits (TF32-style) before a padded-tile GEMM."),
    "level2_81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/padded_tiles_triton_epilogue": (
        INV, "fixed_padded_tiles", "triton", CPU,
        "Padded 16-row tile GEMM, then a flat Triton swish/2/clamp/tanh/clamp epilogue whose block is chosen from the batch."),
    "level2_81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/quarter_batch_chunks": (
        VIO, "chunk_size_by_batch", "pytorch", CPU,
        "The batch is processed in 4 chunks of ceil(B/4) rows, so each F.linear call's shape depends on the batch."),
    "level2_88_Gemm_GroupNorm_Swish_Multiply_Swish/per_sample_gemv_groupnorm": (
        INV, "per_sample_gemv", "pytorch", CPU,
        "One addmv per sample, F.group_norm on the row, swish, multiply, swish."),
    "level2_88_Gemm_GroupNorm_Swish_Multiply_Swish/batch_shift_onepass_var": (
        VIO, "batch_statistic_shift", "pytorch", CPU,
        "Padded-tile GEMM, then one-pass shifted GroupNorm statistics where the shift is the mean of the whole batch's GEMM output."),
    "level2_94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm/padded_tiles_triton_groupnorm": (
        INV, "per_row_program_fixed_block", "triton", CPU,
        "Padded 16-row tile GEMM, then one Triton program per row doing bias, hardtanh, mish and GroupNorm over a (groups, group size) block."),
    "level2_94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm/group_stats_via_gemm_large_batch": (
        VIO, "algorithm_by_batch", "pytorch", CPU,
        "For batches of 4 or more the GroupNorm mean and variance are GEMMs with a block-averaging matrix; F.group_norm below."),
    "level2_94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm/triton_atomic_group_stats_by_batch": (
        VIO, "split_atomics_by_batch", "triton", CPU,
        "Padded-tile GEMM, then GroupNorm sums by a Triton kernel that splits every row's groups over 4 programs (float atomic adds of per-group partials) for batches below 4 and 1 from 4 on."),
    "level2_95_Matmul_Add_Swish_Tanh_GELU_Hardtanh/per_sample_gemv_folded_add": (
        INV, "per_sample_gemv", "pytorch", CPU,
        "add_value folded into the bias, one addmv per sample, swish, tanh, GELU, hardtanh."),
    "level2_95_Matmul_Add_Swish_Tanh_GELU_Hardtanh/splitk4_tree_by_parity": (
        VIO, "reduction_tree_by_batch_parity", "pytorch", CPU,
        "Split-K in four padded-tile GEMMs; the partials are added as a tree for even batches and sequentially for odd ones."),
    # --- level 2 conv problems
    "level2_48_Conv3d_Scaling_Tanh_Multiply_Sigmoid/per_sample_conv_fused_epilogue": (
        INV, "per_sample_conv", "pytorch", CPU,
        "One F.conv3d call per sample, then scale, tanh, multiply, sigmoid."),
    "level2_48_Conv3d_Scaling_Tanh_Multiply_Sigmoid/batched_conv_epilogue": (
        VIO, "library_conv_batch_dependent", "pytorch", CPU,
        "Batched nn.Conv3d on the whole batch with an in-place epilogue; this CPU build gives a sample different conv3d bits at batch 1."),
    "level2_50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling/per_sample_convT_reshape_pool": (
        INV, "per_sample_conv", "pytorch", CPU,
        "One conv_transpose3d per sample, 2x2x2 average pool as crop + reshape + mean, bias and scales."),
    "level2_50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling/fixed_chunk2_convT": (
        VIO, "fixed_chunking_library_occupancy", "pytorch", CPU,
        "Fixed chunks of two samples through the batched conv transpose: the chunk size is fixed, but a sample alone is a chunk of one and conv_transpose3d gives it different bits than in a chunk of two."),
    "level2_58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp/per_sample_convT_lse": (
        INV, "per_sample_conv", "pytorch", CPU,
        "One conv_transpose3d per sample, channel logsumexp with a per-voxel max, hardswish-like tail."),
    "level2_58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp/batch_global_max_lse": (
        VIO, "batch_wide_stabilizer", "pytorch", CPU,
        "Per-sample conv transpose, then a channel logsumexp stabilised by the max of the whole batch tensor instead of a per-voxel max."),
    "level2_60_ConvTranspose3d_Swish_GroupNorm_HardSwish/per_sample_convT_groupnorm": (
        INV, "per_sample_conv", "pytorch", CPU,
        "Per sample: conv_transpose3d, silu, F.group_norm, hardswish, written into a preallocated output."),
    "level2_60_ConvTranspose3d_Swish_GroupNorm_HardSwish/chunked_stats_by_batch": (
        VIO, "split_reduction_by_batch", "pytorch", CPU,
        "Per-sample conv transpose, then GroupNorm statistics summed over max(1, 8 // B) spatial slabs."),
    "level2_89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max/per_sample_convT_channel_max_split": (
        INV, "exact_reduction_split_by_batch", "pytorch", CPU,
        "Per-sample conv transpose + max pool, softmax, subtract, swish, then the channel max in 4 or 2 groups chosen by batch; max is exact."),
    "level2_89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max/batched_convT_fused_tail": (
        VIO, "library_conv_batch_dependent", "pytorch", CPU,
        "Batched nn.ConvTranspose3d + max pool on the whole batch, then the softmax/swish/max tail."),
    "level2_96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp/per_sample_convT_folded_scale": (
        INV, "per_sample_conv", "pytorch", CPU,
        "Scale (0.5) folded into the conv-transpose weights, one call per sample, max pool, mean, clamp."),
    "level2_96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp/flat_cumsum_segment_means": (
        VIO, "prefix_sum_across_batch", "pytorch", CPU,
        "Per-sample conv transpose + max pool, then all global averages from one cumsum over the flattened batch (segment sum = difference of prefix sums), so a sample's value depends on the samples before it."),
    # --- coupling problems
    "level1_97_CosineSimilarityLoss/manual_dot_norm_mean": (
        NA, "coupling_loss_over_batch", "pytorch", CPU,
        "Row dot products and norms, 1 - cosine, mean over the batch (scalar)."),
    "level1_97_CosineSimilarityLoss/triton_row_cosine": (
        NA, "coupling_loss_over_batch", "triton", CPU,
        "One Triton program per row for the cosine distance, then a mean over the batch (scalar)."),
    "level1_100_HingeLoss/relu_mean": (
        NA, "coupling_loss_over_batch", "pytorch", CPU,
        "relu(1 - p * t).mean() over the whole batch (scalar)."),
    "level1_100_HingeLoss/triton_block_partials": (
        NA, "coupling_loss_over_batch", "triton", CPU,
        "Triton block partial sums of the hinge terms over the flattened batch, then sum / numel (scalar)."),
    "level2_52_Conv2d_Activation_BatchNorm/functional_bn_train": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "conv2d, x * tanh(softplus(x)), F.batch_norm with training=True."),
    "level2_52_Conv2d_Activation_BatchNorm/manual_bn_stats": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "conv2d, mish, hand-written training-mode BatchNorm with var_mean over (N, H, W) and running-stat update."),
    "level2_77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool/per_sample_convT_bn_train": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Per-sample conv transpose, scale, training-mode F.batch_norm over the batch, spatial mean."),
    "level2_77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool/bn_folded_after_gap": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Batch statistics over (N, D, H, W), then the BatchNorm affine applied after the global average pool."),
    "level3_46_NetVladWithGhostClusters/functional_bn_einsum": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Assignment GEMM, training-mode F.batch_norm over all descriptors, softmax, einsum aggregation, two normalisations."),
    "level3_46_NetVladWithGhostClusters/manual_bn_bmm": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Assignment GEMM, hand-written batch statistics over all B*N rows, softmax, bmm aggregation."),
    "level3_47_NetVladNoGhostClusters/functional_bn_einsum": (
        NA, "coupling_batch_statistics", "pytorch", CPU,
        "Assignment GEMM, training-mode F.batch_norm over all descriptors, softmax, einsum aggregation, two normalisations."),
    "level3_47_NetVladNoGhostClusters/triton_softmax_assign": (
        NA, "coupling_batch_statistics", "triton", CPU,
        "Batch statistics over all B*N rows in torch, then a Triton kernel per row doing the BatchNorm affine and the softmax, bmm aggregation."),
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
    return load_module(os.path.join(HERE, "problems", stem + ".py"), f"heldout5_problem_{_counter[0]}")


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
def evaluate(key, op):
    intended, mech, lang, obs, desc = CANDIDATES[key]
    stem, name = key.split("/")
    level, cpu_bs, profile, coupling = PROBLEMS[stem]
    cand_path = os.path.join(HERE, "pool", stem, name + ".py")
    t0 = time.time()
    rec = {"key": key, "problem": f"problems/{stem}.py", "level": level, "intended": intended,
           "label_cpu": None, "mechanism": mech, "language": lang, "description": desc,
           "observable_on": obs, "cpu_batch_size": cpu_bs, "evidence": {}, "correct": None}
    try:
        if "cpu" not in obs and lang == "cuda":
            rec["label_cpu"] = "cuda_only"
            rec["evidence"] = {"reason": "native CUDA extension (load_inline); cannot be built or run on CPU. "
                                         "Expected verdict assigned by reasoning about the kernel.",
                               "expected_on_cuda": intended, "labelled_by": "reasoning",
                               "correct_by": "reasoning (same math as the reference in fp32)"}
            rec["correct"] = True
            if op["coupled"]:
                rec["label_cpu"] = "not_applicable"
        else:
            ok, cinfo = correctness(stem, cand_path, cpu_bs)
            rec["correct"] = ok
            rec["evidence"]["correctness"] = cinfo
            rec["evidence"]["operator_check"] = op
            if op["coupled"]:
                rec["label_cpu"] = "not_applicable"
                rec["evidence"]["coupling"] = coupling
            else:
                prof = TRITON_PROFILE[profile] if lang == "triton" else profile
                label, ev = bi_sweep(stem, cand_path, SWEEPS[prof], CANDIDATE_TIME_BUDGET_S)
                rec["evidence"]["sweep"] = ev
                rec["label_cpu"] = label
    except Exception as e:  # keep going; record the failure
        rec["label_cpu"] = "error"
        rec["evidence"]["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-800:]
        traceback.print_exc()
    rec["evidence"]["seconds"] = round(time.time() - t0, 1)
    return rec


def _op_task(stem):
    try:
        return stem, operator_check(stem)
    except Exception as e:
        return stem, {"coupled": None, "error": "".join(traceback.format_exception_only(type(e), e)).strip()[-500:]}


def _init_worker():
    torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    out_path = args.out or os.path.join(HERE, "labels.partial.json" if args.only else "labels.json")
    keys = [k for k in CANDIDATES if not args.only or any(s in k for s in args.only)]
    stems = sorted({k.split("/")[0] for k in keys})
    t_start = time.time()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), initializer=_init_worker) as ex:
        ops = dict(ex.map(_op_task, stems))
        for stem, op in ops.items():
            expected = PROBLEMS[stem][3] is not None
            flag = "" if op.get("coupled") == expected else "   <-- OPERATOR CHECK DISAGREES WITH PROBLEM TABLE"
            print(f"operator {stem:70s} coupled={op.get('coupled')}{flag}", flush=True)
        futs = [(k, ex.submit(evaluate, k, ops[k.split('/')[0]])) for k in keys]
        results = []
        for k, f in futs:
            rec = f.result()
            agree = rec["label_cpu"] == rec["intended"] or rec["label_cpu"] == "cuda_only"
            print(f"{time.time() - t_start:7.1f}s {rec['evidence']['seconds']:6.1f}s {k:90s} "
                  f"intended={rec['intended']:14s} label={rec['label_cpu']:14s} correct={rec['correct']}"
                  f"{'' if agree else '   <-- MISMATCH'}", flush=True)
            results.append(rec)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {len(results)} records to {out_path} in {time.time() - t_start:.1f}s")


if __name__ == "__main__":
    main()
