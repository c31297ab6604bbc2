# squash(s) = |s|^2 s / ((1 + |s|^2) |s|): a zero capsule vector gives 0 / 0 = NaN.
import torch

torch.manual_seed(0)
s = torch.zeros(1, 2, 8)
s[0, 0] = torch.randn(8)
squared_norm = (s ** 2).sum(-1, keepdim=True)
v = squared_norm * s / ((1. + squared_norm) * torch.sqrt(squared_norm))
print(v)
if not torch.isfinite(v).all():
    print("TRIGGERED")
