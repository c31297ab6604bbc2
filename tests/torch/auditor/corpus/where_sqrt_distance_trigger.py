# torch.where(d2 > 0, sqrt(d2), 0): for the self-distance d2 == 0 the unused
# branch sqrt(d2) still gets a zero upstream gradient and its backward
# computes 0 / (2 * sqrt(0)) = NaN (pytorch/pytorch#23395).
import torch

torch.manual_seed(0)
pos = torch.rand(1, 3, 3, requires_grad=True)
d2 = ((pos[:, :, None, :] - pos[:, None, :, :]) ** 2).sum(-1)
d = torch.where(d2 > 0, torch.sqrt(d2), torch.zeros_like(d2))
d.sum().backward()
print("d finite:", torch.isfinite(d).all().item(), "grad =", pos.grad)
if not torch.isfinite(pos.grad).all():
    print("TRIGGERED")
