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
        a = x.reshape(-1, D) @ self.clusters
        bn = self.batch_norm
        a = F.batch_norm(a, bn.running_mean, bn.running_var, bn.weight, bn.bias, True, bn.momentum, bn.eps)
        a = F.softmax(a, dim=1)[:, :self.cluster_size].reshape(B, N, self.cluster_size)
        a_sum = a.sum(dim=1, keepdim=True)
        vlad = torch.einsum("bnk,bnd->bdk", a, x) - a_sum * self.clusters2
        vlad = F.normalize(vlad, dim=1)
        return F.normalize(vlad.reshape(B, -1), dim=1)
