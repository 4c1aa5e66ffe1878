import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// x: (B, C, HW). One thread per (b, spatial position); loops over C sequentially.
__global__ void rmsnorm_channels(const float* __restrict__ x, float* __restrict__ y,
                                 int C, int HW, long total, float eps) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const long b = t / HW;
    const long s = t % HW;
    const float* xp = x + b * (long)C * HW + s;
    float* yp = y + b * (long)C * HW + s;
    float acc = 0.f;
    for (int c = 0; c < C; ++c) { float v = xp[(long)c * HW]; acc += v * v; }
    const float inv = 1.f / sqrtf(acc / C + eps);
    for (int c = 0; c < C; ++c) yp[(long)c * HW] = xp[(long)c * HW] * inv;
}

torch::Tensor rmsnorm(torch::Tensor x, double eps) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int B = xc.size(0), C = xc.size(1);
    const int HW = xc.numel() / ((long)B * C);
    const long total = (long)B * HW;
    const int threads = 256;
    const long blocks = (total + threads - 1) / threads;
    rmsnorm_channels<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), C, HW, total, (float)eps);
    return y;
}
"""

_cpp_src = "torch::Tensor rmsnorm(torch::Tensor x, double eps);"

_ext = load_inline(name="rmsnorm_channels_ext", cpp_sources=_cpp_src, cuda_sources=_cuda_src,
                   functions=["rmsnorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm(x, self.eps)
