# logits = sim / temperature with a learnable temperature that reached 0
# (it is an unconstrained nn.Parameter): sim / 0 = +-inf (and 0 / 0 = NaN).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
temperature = torch.tensor(0.0, requires_grad=True)
za = F.normalize(torch.randn(3, 4), dim=-1)
zb = F.normalize(torch.randn(3, 4), dim=-1)
logits = za @ zb.t() / temperature
print(logits)
if not torch.isfinite(logits).all():
    print("TRIGGERED")
