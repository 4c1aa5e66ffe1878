import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        # kl_div(log p, t, 'batchmean') = sum(t * (log t - log p)) / batch
        per_elem = torch.xlogy(targets, targets) - targets * torch.log(predictions)
        return per_elem.sum() / predictions.shape[0]
