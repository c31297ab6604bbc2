# logits / temperature for a learned temperature that hit 0: x / 0 = +-inf and
# the subsequent cross-entropy is NaN.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
temperature = torch.zeros(1, requires_grad=True)
logits = torch.tensor([[2.0, -1.0, 0.5]])
scaled = logits / temperature
nll = F.cross_entropy(scaled, torch.tensor([0]))
nll.backward()
print("scaled =", scaled.detach(), "nll =", nll.item(), "grad =", temperature.grad)
if not torch.isfinite(scaled).all() or not torch.isfinite(temperature.grad).all():
    print("TRIGGERED")
