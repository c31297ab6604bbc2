# exp(scores) / exp(scores).sum(): a finite attention score above ~88.7
# overflows exp to inf and inf / inf = NaN.
import torch

torch.manual_seed(0)
scores = torch.tensor([[[95.0, 1.0, 0.0]]], requires_grad=True)
weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)
print("weights =", weights.detach())
if not torch.isfinite(weights).all():
    print("TRIGGERED")
