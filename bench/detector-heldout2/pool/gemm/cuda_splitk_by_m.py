"""GEMM in native CUDA: 32x32 shared-memory tiles, split-K over gridDim.z.

For short M the K loop is split four ways and the slices are added with
atomicAdd into an fp32 output; otherwise a single pass stores directly.
"""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#define TILE 32

template <typename T>
__global__ void mm_tiles(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
                         int M, int N, int K, int k_per, bool atomic) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  const int k_lo = blockIdx.z * k_per;
  const int k_hi = min(K, k_lo + k_per);
  float acc = 0.f;
  for (int k0 = k_lo; k0 < k_hi; k0 += TILE) {
    int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < k_hi) ? static_cast<float>(A[(size_t)row * K + ka]) : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (kb < k_hi && col < N) ? static_cast<float>(B[(size_t)kb * N + col]) : 0.f;
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < TILE; ++kk) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) {
    if (atomic) atomicAdd(&C[(size_t)row * N + col], acc);
    else C[(size_t)row * N + col] = acc;
  }
}

torch::Tensor mm(torch::Tensor a, torch::Tensor b, int64_t split_k) {
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::zeros({M, N}, a.options().dtype(torch::kFloat));
  int k_per = ((K + split_k - 1) / split_k + TILE - 1) / TILE * TILE;
  dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE, split_k);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mm", [&] {
    mm_tiles<scalar_t><<<grid, block>>>(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
        c.data_ptr<float>(), M, N, K, k_per, split_k > 1);
  });
  return c.to(a.scalar_type());
}
"""

_mod = None


def _ext():
    global _mod
    if _mod is None:
        _mod = load_inline(name="heldout2_mm_splitk", cpp_sources="torch::Tensor mm(torch::Tensor a, torch::Tensor b, int64_t split_k);",
                           cuda_sources=_SRC, functions=["mm"], extra_cuda_cflags=["-O3", "--use_fast_math"])
    return _mod


def kernel(a, b):
    M = a.shape[0]
    split_k = 4 if M < 64 else 1
    return _ext().mm(a.contiguous(), b.contiguous(), split_k)
