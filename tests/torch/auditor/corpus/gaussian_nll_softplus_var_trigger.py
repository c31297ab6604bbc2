# softplus(raw) underflows to exactly 0 for raw < ~-104, so log(var) = -inf and
# (y - mu)**2 / var = inf (or 0/0 = NaN when y == mu).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
raw = torch.tensor([-120.0, 0.3], requires_grad=True)
mu = torch.tensor([0.5, 0.0])
y = torch.tensor([0.7, 0.1])
var = F.softplus(raw)
nll = 0.5 * (torch.log(var) + (y - mu) ** 2 / var).mean()
nll.backward()
print("var =", var.detach(), "nll =", nll.item(), "grad =", raw.grad)
if not torch.isfinite(nll) or not torch.isfinite(raw.grad).all():
    print("TRIGGERED")
