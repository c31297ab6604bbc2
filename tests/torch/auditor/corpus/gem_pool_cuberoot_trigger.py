# (mean(x ** 3) + 1e-12) ** (1/3) for a channel whose activations are mostly
# negative: the base is negative and a fractional power of it is NaN.
import torch

torch.manual_seed(0)
x = torch.tensor([[[-1.0, -2.0, 0.5]]], requires_grad=True)
y = (torch.mean(x ** 3.0, dim=-1) + 1e-12) ** (1 / 3.0)
print("GeM =", y.detach())
if not torch.isfinite(y).all():
    print("TRIGGERED")
