# (x - mean) / (var.sqrt() + eps) on a constant row (e.g. the all-zero
# padding embedding): var = 0, and the backward of sqrt at 0 is 0/0 = NaN.
import torch

torch.manual_seed(0)
x = torch.zeros(2, 8)
x[0] = torch.randn(8)
x.requires_grad_(True)
mean = x.mean(-1, keepdim=True)
var = ((x - mean) ** 2).mean(-1, keepdim=True)
out = (x - mean) / (var.sqrt() + 1e-5)
out.sum().backward()
print("grad row 1:", x.grad[1])
if not torch.isfinite(x.grad).all():
    print("TRIGGERED")
