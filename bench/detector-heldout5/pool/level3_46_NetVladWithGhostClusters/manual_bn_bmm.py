import torch
import torch.nn as nn
import torch.nn.functional as F


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
        a = torch.mm(x.reshape(-1, D), self.clusters)
        var, mean = torch.var_mean(a, dim=0, unbiased=False, keepdim=True)
        a = (a - mean) / torch.sqrt(var + self.batch_norm.eps) * self.batch_norm.weight + self.batch_norm.bias
        a = torch.softmax(a, dim=1)[:, :self.cluster_size].reshape(B, N, -1)
        vlad = torch.bmm(x.transpose(1, 2), a)  # B x D x K
        vlad = vlad - a.sum(dim=1, keepdim=True) * self.clusters2
        vlad = vlad / vlad.norm(dim=1, keepdim=True).clamp_min(1e-12)
        vlad = vlad.reshape(B, -1)
        return vlad / vlad.norm(dim=1, keepdim=True).clamp_min(1e-12)
