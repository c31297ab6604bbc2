# Hand-written KL(p_t || p_s): when a softened probability underflows to 0
# (logit gap / T > ~104), p_t / p_s = 0 / 0 or x / 0 and the KL is NaN / inf.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
T = 4.0
t_logits = torch.tensor([[600.0, 0.0, 0.0]])
s_logits = torch.tensor([[0.0, 500.0, 0.0]], requires_grad=True)
p_t = F.softmax(t_logits / T, dim=1)
p_s = F.softmax(s_logits / T, dim=1)
kd = (p_t * torch.log(p_t / p_s)).sum(dim=1).mean() * T * T
kd.backward()
print("kd =", kd.item(), "grad =", s_logits.grad)
if not torch.isfinite(kd) or not torch.isfinite(s_logits.grad).all():
    print("TRIGGERED")
