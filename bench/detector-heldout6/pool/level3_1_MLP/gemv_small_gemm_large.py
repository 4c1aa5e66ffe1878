import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        B = x.shape[0]
        if B <= 2:
            # latency path: matrix-vector products per sample
            rows = []
            for i in range(B):
                h = x[i]
                for j, lin in enumerate(linears):
                    h = torch.addmv(lin.bias, lin.weight, h)
                    if j < len(linears) - 1:
                        h = torch.relu(h)
                rows.append(h)
            return torch.stack(rows, 0)
        h = x
        for j, lin in enumerate(linears):
            h = F.linear(h, lin.weight, lin.bias)
            if j < len(linears) - 1:
                h = torch.relu(h)
        return h
