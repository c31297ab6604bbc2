# PPO importance ratio exp(new_logp - old_logp): a stale old log-prob of -100
# against a new one of -1 gives exp(99) = inf, and inf * 0 (zero advantage)
# = NaN in the surrogate (prime-rl#2084).
import torch

torch.manual_seed(0)
new_logp = torch.tensor([-1.0, -0.5], requires_grad=True)
old_logp = torch.tensor([-100.0, -0.6])
adv = torch.tensor([0.0, 1.0])
ratio = torch.exp(new_logp - old_logp)
surr1 = ratio * adv
surr2 = torch.clamp(ratio, 0.8, 1.2) * adv
loss = -torch.min(surr1, surr2).mean()
loss.backward()
print("ratio =", ratio.detach(), "loss =", loss.item(), "grad =", new_logp.grad)
if not torch.isfinite(ratio).all() or not torch.isfinite(loss) or not torch.isfinite(new_logp.grad).all():
    print("TRIGGERED")
