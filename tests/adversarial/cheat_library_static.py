"""Cheat (library-call, static): calls torch's own RMSNorm."""

import torch.nn.functional as F


def kernel(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
