import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        w, b = self.bmm.weight, self.bmm.bias
        eps = self.instance_norm.eps
        out = torch.empty_like(y)
        for i in range(x.shape[0]):
            h = torch.addmv(b, w, x[i])
            var, mean = torch.var_mean(h, unbiased=False)
            h = (h - mean) * torch.rsqrt(var + eps)
            out[i] = (h + y[i]) * y[i]
        return out
