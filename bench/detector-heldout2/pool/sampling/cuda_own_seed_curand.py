"""Sampling in native CUDA: one block per request, curand keyed by its seed.

Logits are stable-sorted (exact) in torch; the block computes the softmax
normaliser with a fixed 256-thread tree, then thread 0 walks the sorted row
for top-k / top-p and draws with curand_init(seed[row], 0, 0).
"""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <curand_kernel.h>

__global__ void sample_rows(const float* __restrict__ sl, const long* __restrict__ si,
                            const float* __restrict__ temp, const int* __restrict__ topk,
                            const float* __restrict__ topp, const long* __restrict__ seed,
                            long* __restrict__ out, int V) {
  const int row = blockIdx.x;
  const float* x = sl + (size_t)row * V;
  const float t = temp[row];
  if (t == 0.f) { if (threadIdx.x == 0) out[row] = si[(size_t)row * V]; return; }
  const float mx = x[0];
  __shared__ float red[256];
  float local = 0.f;
  for (int j = threadIdx.x; j < V; j += 256) local += __expf((x[j] - mx) / t);
  red[threadIdx.x] = local;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const float Z = red[0];
  const int k = topk[row] > 0 ? min(topk[row], V) : V;
  float mass_k = 0.f;
  for (int j = 0; j < k; ++j) mass_k += __expf((x[j] - mx) / t) / Z;
  int n = 0; float cum = 0.f;
  while (n < k) {
    float pj = __expf((x[n] - mx) / t) / Z / mass_k;
    if (cum >= topp[row]) break;
    cum += pj; ++n;
  }
  curandStatePhilox4_32_10_t st;
  curand_init((unsigned long long)seed[row], 0, 0, &st);
  const float u = curand_uniform(&st) * cum;
  float c = 0.f; int pos = n - 1;
  for (int j = 0; j < n; ++j) {
    c += __expf((x[j] - mx) / t) / Z / mass_k;
    if (c > u) { pos = j; break; }
  }
  out[row] = si[(size_t)row * V + pos];
}

torch::Tensor sample(torch::Tensor sl, torch::Tensor si, torch::Tensor temp, torch::Tensor topk,
                     torch::Tensor topp, torch::Tensor seed) {
  const int B = sl.size(0), V = sl.size(1);
  auto out = torch::empty({B}, si.options());
  sample_rows<<<B, 256>>>(sl.data_ptr<float>(), si.data_ptr<long>(), temp.data_ptr<float>(),
                          topk.data_ptr<int>(), topp.data_ptr<float>(), seed.data_ptr<long>(),
                          out.data_ptr<long>(), V);
  return out;
}
"""

_ext = None


def kernel(logits, temperature, top_k, top_p, seed):
    global _ext
    if _ext is None:
        _ext = load_inline(name="heldout2_sample_curand",
                           cpp_sources="torch::Tensor sample(torch::Tensor sl, torch::Tensor si, torch::Tensor temp, torch::Tensor topk, torch::Tensor topp, torch::Tensor seed);",
                           cuda_sources=_SRC, functions=["sample"], extra_cuda_cflags=["-O3"])
    sl, si = torch.sort(logits.float(), dim=-1, descending=True, stable=True)
    return _ext.sample(sl.contiguous(), si.contiguous(), temperature.float().contiguous(),
                       top_k.int().contiguous(), top_p.float().contiguous(), seed.long().contiguous())
