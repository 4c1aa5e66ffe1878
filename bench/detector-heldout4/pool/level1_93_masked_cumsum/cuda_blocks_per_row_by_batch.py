import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// Pass 1: each block scans one tile of one row (masked), writes local prefix and tile total.
__global__ void tile_scan(const float* __restrict__ x, const bool* __restrict__ m, float* __restrict__ y,
                          float* __restrict__ tile_tot, int n_cols, int tiles_per_row) {
    extern __shared__ float s[];
    int row = blockIdx.y;
    int tile = blockIdx.x;
    int tile_len = (n_cols + tiles_per_row - 1) / tiles_per_row;
    int start = tile * tile_len;
    int end = min(start + tile_len, n_cols);
    // each thread scans a contiguous chunk serially, then block-scan of chunk totals
    int per_thread = (tile_len + blockDim.x - 1) / blockDim.x;
    int c0 = start + threadIdx.x * per_thread;
    int c1 = min(c0 + per_thread, end);
    float acc = 0.f;
    for (int c = c0; c < c1; ++c) {
        long off = (long)row * n_cols + c;
        acc += m[off] ? x[off] : 0.f;
        y[off] = acc;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int o = 1; o < blockDim.x; o <<= 1) {
        float v = threadIdx.x >= o ? s[threadIdx.x - o] : 0.f;
        __syncthreads();
        s[threadIdx.x] += v;
        __syncthreads();
    }
    float prefix = threadIdx.x > 0 ? s[threadIdx.x - 1] : 0.f;
    for (int c = c0; c < c1; ++c) y[(long)row * n_cols + c] += prefix;
    if (threadIdx.x == blockDim.x - 1) tile_tot[row * tiles_per_row + tile] = s[threadIdx.x];
}

// Pass 2: add the exclusive prefix of the tile totals.
__global__ void add_carry(float* __restrict__ y, const float* __restrict__ tile_tot, int n_cols, int tiles_per_row) {
    int row = blockIdx.y;
    int tile = blockIdx.x;
    if (tile == 0) return;
    float carry = 0.f;
    for (int t = 0; t < tile; ++t) carry += tile_tot[row * tiles_per_row + t];
    int tile_len = (n_cols + tiles_per_row - 1) / tiles_per_row;
    int start = tile * tile_len;
    int end = min(start + tile_len, n_cols);
    for (int c = start + threadIdx.x; c < end; c += blockDim.x) y[(long)row * n_cols + c] += carry;
}

torch::Tensor masked_cumsum_cuda(torch::Tensor x, torch::Tensor mask) {
    auto xc = x.contiguous();
    auto mc = mask.contiguous();
    int rows = xc.size(0);
    int n_cols = xc.numel() / rows;
    auto y = torch::empty_like(xc);
    // fill the GPU: ~264 blocks in flight on an H100 (132 SMs x 2)
    int tiles_per_row = std::max(1, std::min(64, 264 / std::max(rows, 1)));
    auto tot = torch::empty({rows * tiles_per_row}, xc.options());
    int threads = 256;
    dim3 grid(tiles_per_row, rows);
    tile_scan<<<grid, threads, threads * sizeof(float)>>>(xc.data_ptr<float>(), mc.data_ptr<bool>(),
        y.data_ptr<float>(), tot.data_ptr<float>(), n_cols, tiles_per_row);
    add_carry<<<grid, threads>>>(y.data_ptr<float>(), tot.data_ptr<float>(), n_cols, tiles_per_row);
    return y;
}
"""

_cpp_src = "torch::Tensor masked_cumsum_cuda(torch::Tensor x, torch::Tensor mask);"

_ext = None


def _get_ext():
    global _ext
    if _ext is None:
        _ext = load_inline(name="masked_cumsum_tiles_ext", cpp_sources=_cpp_src, cuda_sources=_cuda_src,
                           functions=["masked_cumsum_cuda"], verbose=False)
    return _ext


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x, mask):
        assert self.dim == 1 and x.dim() == 2
        return _get_ext().masked_cumsum_cuda(x, mask)
