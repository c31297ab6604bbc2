# log(probs.gather(...)) of a stored action whose probability under the
# current (now nearly deterministic) policy underflowed to 0 -> -inf.
import torch

torch.manual_seed(0)
logits = torch.tensor([[0.0, 110.0, 1.0, 2.0]], requires_grad=True)
probs = torch.softmax(logits, dim=1)
a = torch.tensor([0])
log_prob = torch.log(probs.gather(1, a.unsqueeze(1)).squeeze(1))
loss = -(log_prob * 1.0).mean()
loss.backward()
print("log_prob =", log_prob.detach(), "grad =", logits.grad)
if not torch.isfinite(log_prob).all() or not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
