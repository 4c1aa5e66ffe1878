import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bn_softmax_kernel(a_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, out_ptr, K: tl.constexpr):
    row = tl.program_id(0)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + row * K + k)
    a = (a - tl.load(mean_ptr + k)) * tl.load(rstd_ptr + k) * tl.load(w_ptr + k) + tl.load(b_ptr + k)
    a = a - tl.max(a, axis=0)
    e = tl.exp(a)
    tl.store(out_ptr + row * K + k, e / tl.sum(e, axis=0))


class ModelNew(nn.Module):
    def __init__(self, cluster_size, feature_size, ghost_clusters):
        super(ModelNew, self).__init__()
        self.feature_size = feature_size
        self.cluster_size = cluster_size
        self.ghost_clusters = ghost_clusters
        init_sc = (1 / (feature_size ** 0.5))
        clusters = cluster_size + ghost_clusters
        self.clusters = nn.Parameter(init_sc * torch.randn(feature_size, clusters))
        self.batch_norm = nn.BatchNorm1d(clusters)
        self.clusters2 = nn.Parameter(init_sc * torch.randn(1, feature_size, cluster_size))
        self.out_dim = self.cluster_size * feature_size

    def forward(self, x, mask=None):
        B, N, D = x.shape
        a = (x.reshape(-1, D) @ self.clusters).contiguous()
        # batch statistics over all B*N descriptors (training-mode BatchNorm1d)
        var, mean = torch.var_mean(a, dim=0, unbiased=False)
        rstd = torch.rsqrt(var + self.batch_norm.eps)
        K = a.shape[1]
        p = torch.empty_like(a)
        bn_softmax_kernel[(a.shape[0],)](a, mean, rstd, self.batch_norm.weight, self.batch_norm.bias, p, K=K)
        p = p.reshape(B, N, K)
        vlad = torch.bmm(p.transpose(1, 2), x).transpose(1, 2) - p.sum(dim=1, keepdim=True) * self.clusters2
        vlad = F.normalize(vlad, dim=1)
        return F.normalize(vlad.reshape(B, -1), dim=1)
