# tanh-squashed Gaussian: for a pre-tanh sample x_t >= ~9.1, tanh(x_t) is
# exactly 1.0 in float32, so log(1 - action**2) = log(0) = -inf.
import torch
from torch.distributions import Normal

torch.manual_seed(0)
mean = torch.tensor([[12.0, 0.0]], requires_grad=True)
normal = Normal(mean, torch.full((1, 2), 0.1))
x_t = mean + 0.0 * normal.rsample()          # the sample sits at the mean
action = torch.tanh(x_t)
log_prob = normal.log_prob(x_t)
log_prob = log_prob - torch.log(1 - action.pow(2))
loss = log_prob.sum()
loss.backward()
print("action =", action.detach(), "log_prob =", log_prob.detach())
if not torch.isfinite(log_prob).all() or not torch.isfinite(mean.grad).all():
    print("TRIGGERED")
