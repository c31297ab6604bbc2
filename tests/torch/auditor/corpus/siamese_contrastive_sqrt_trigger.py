# A positive pair whose two inputs are identical (duplicate sample) has
# distance exactly 0; the backward of sqrt at 0 gives 0/0 = NaN.
import torch

torch.manual_seed(0)
o1 = torch.randn(2, 8, requires_grad=True)
o2 = o1.detach().clone()
o2[1] += 1.0
same = torch.tensor([1.0, 0.0])
d = torch.sqrt(torch.sum((o1 - o2) ** 2, dim=1))
loss = (same * d.pow(2) + (1 - same) * torch.relu(2.0 - d).pow(2)).mean()
loss.backward()
print("d =", d.detach(), "grad =", o1.grad)
if not torch.isfinite(o1.grad).all():
    print("TRIGGERED")
