import torch
import torch.nn as nn
import torch.nn.functional as F

class ModelNew(nn.Module):
    def __init__(self, num_input_features: int, num_output_features: int):
        """
        :param num_input_features: The number of input feature maps
        :param num_output_features: The number of output feature maps
        """
        super(ModelNew, self).__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2)
        )

    def forward(self, x):
        bn, conv = self.transition[0], self.transition[2]
        # training-mode batch statistics, folded into one scale/shift
        var, mean = torch.var_mean(x, dim=(0, 2, 3), unbiased=False)
        with torch.no_grad():
            n = x.numel() // x.shape[1]
            bn.running_mean.mul_(1 - bn.momentum).add_(mean, alpha=bn.momentum)
            bn.running_var.mul_(1 - bn.momentum).add_(var * n / (n - 1), alpha=bn.momentum)
            bn.num_batches_tracked += 1
        scale = bn.weight * torch.rsqrt(var + bn.eps)
        shift = bn.bias - mean * scale
        h = torch.relu(x * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1))
        # 1x1 conv and 2x2 average pool commute: pool first, 4x fewer conv FLOPs
        h = F.avg_pool2d(h, kernel_size=2, stride=2)
        return F.conv2d(h, conv.weight)
