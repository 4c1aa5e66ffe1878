import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Per-sample GEMV; for small (latency-bound) batches the normalisation statistics are
    computed in float64 since the extra cost is hidden, fp32 otherwise."""

    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        w, b = self.bmm.weight, self.bmm.bias
        h = torch.stack([torch.addmv(b, w, x[i]) for i in range(x.shape[0])])
        eps = self.instance_norm.eps
        if x.shape[0] < 4:
            hd = h.double()
            var, mean = torch.var_mean(hd, dim=1, unbiased=False, keepdim=True)
            hn = ((hd - mean) / torch.sqrt(var + eps)).float()
        else:
            var, mean = torch.var_mean(h, dim=1, unbiased=False, keepdim=True)
            hn = (h - mean) / torch.sqrt(var + eps)
        return (hn + y) * y
