# where(p > 0, p * log(p), 0): when a softmax probability underflows to 0,
# log(p) = -inf is computed anyway; the forward value is masked but the
# backward gives 0 * (log(0) + 1) = NaN.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
logits = torch.tensor([[0.0, 150.0, 1.0]], requires_grad=True)
p = F.softmax(logits, dim=1)
ent = -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum(dim=1).mean()
ent.backward()
print("entropy =", ent.item(), "grad =", logits.grad)
if not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
