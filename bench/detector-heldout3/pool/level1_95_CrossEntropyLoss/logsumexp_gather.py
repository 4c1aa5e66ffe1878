import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        lse = torch.logsumexp(predictions, dim=1)
        picked = predictions.gather(1, targets.view(-1, 1)).squeeze(1)
        return (lse - picked).mean()
