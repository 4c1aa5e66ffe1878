import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super(ModelNew, self).__init__()
        self.k, self.s, self.p, self.d = kernel_size, stride, padding, dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= 8:
            # NHWC pooling vectorises over channels
            y = F.max_pool2d(x.contiguous(memory_format=torch.channels_last), self.k, self.s, self.p, self.d)
            return y.contiguous()
        return F.max_pool2d(x, self.k, self.s, self.p, self.d)
