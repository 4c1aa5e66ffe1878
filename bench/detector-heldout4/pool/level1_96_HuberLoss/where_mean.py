import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """smooth_l1 (beta = 1) written out: 0.5 d^2 if |d| < 1 else |d| - 0.5, then the mean."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        d = predictions - targets
        ad = d.abs()
        loss = torch.where(ad < 1.0, 0.5 * d * d, ad - 0.5)
        return loss.mean()
