# (1 - p) ** 0.5 with p = exp(-CE): a confidently correct sample (logit gap
# > ~17) has CE == 0 exactly, 1 - p == 0, and d/dx x**0.5 at 0 is inf; times
# the zero upstream factor CE this gives NaN.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
logits = torch.tensor([[30.0, 0.0, 0.0], [0.5, 0.2, 0.1]], requires_grad=True)
ce = F.cross_entropy(logits, torch.tensor([0, 1]), reduction="none")
p = torch.exp(-ce)
loss = ((1 - p) ** 0.5 * ce).mean()
loss.backward()
print("ce =", ce.detach(), "grad =", logits.grad)
if not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
