import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Fold the division into the weights (W / d, b / d) and run one GEMV per sample,
    then GELU."""

    def __init__(self, input_size, output_size, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        w = self.linear.weight / self.divisor
        b = self.linear.bias / self.divisor
        y = torch.cat([F.linear(x[i:i + 1], w, b) for i in range(x.shape[0])])
        return F.gelu(y)
