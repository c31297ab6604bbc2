# Masked mean pooling of a sequence whose attention mask is all zeros:
# 0 / 0 = NaN.
import torch

torch.manual_seed(0)
h = torch.randn(2, 5, 4, requires_grad=True)
attention_mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
mask = attention_mask.unsqueeze(-1).float()
pooled = (h * mask).sum(dim=1) / mask.sum(dim=1)
print("pooled =", pooled.detach())
if not torch.isfinite(pooled).all():
    print("TRIGGERED")
