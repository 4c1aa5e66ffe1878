"""Fused add + RMSNorm in native CUDA: one warp per token, 8 tokens per block.

Each warp owns one row; lanes stride over the row and the warp reduces with
xor-shuffles, so a row's arithmetic is the same in any block.
"""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

template <typename T>
__global__ void add_rms_warp(const T* __restrict__ x, const T* __restrict__ r,
                             const T* __restrict__ w, T* __restrict__ y, T* __restrict__ ro,
                             int rows, int H, float eps) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * 8 + warp;
  if (row >= rows) return;
  const size_t base = (size_t)row * H;
  float acc = 0.f;
  for (int i = lane; i < H; i += 32) {
    T s = static_cast<T>(static_cast<float>(x[base + i]) + static_cast<float>(r[base + i]));
    ro[base + i] = s;
    float f = static_cast<float>(s);
    acc += f * f;
  }
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
  const float rstd = rsqrtf(acc / H + eps);
  for (int i = lane; i < H; i += 32) {
    float f = static_cast<float>(ro[base + i]);
    y[base + i] = static_cast<T>(f * rstd * static_cast<float>(w[i]));
  }
}

std::vector<torch::Tensor> add_rms(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
  auto y = torch::empty_like(x);
  auto ro = torch::empty_like(x);
  const int rows = x.size(0), H = x.size(1);
  const int blocks = (rows + 7) / 8;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "add_rms", [&] {
    add_rms_warp<scalar_t><<<blocks, 256>>>(x.data_ptr<scalar_t>(), r.data_ptr<scalar_t>(),
        w.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), ro.data_ptr<scalar_t>(), rows, H, (float)eps);
  });
  return {y, ro};
}
"""

_ext = None


def _get():
    global _ext
    if _ext is None:
        _ext = load_inline(
            name="heldout2_add_rms_warp",
            cpp_sources="std::vector<torch::Tensor> add_rms(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps);",
            cuda_sources=_SRC, functions=["add_rms"], extra_cuda_cflags=["-O3"])
    return _ext


def kernel(x, residual, weight, eps):
    y, ro = _get().add_rms(x.contiguous(), residual.contiguous(), weight.contiguous(), float(eps))
    return y, ro
