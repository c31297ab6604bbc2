# ACE loss: if some class k never gets probability mass at any frame (its
# logits are ~100 below the winner everywhere) the aggregated probability is
# exactly 0, log gives -inf and 0 * -inf = NaN (label count for k is 0).
import torch

torch.manual_seed(0)
T = 4
logits = torch.tensor([[[50.0, 0.0, -60.0]] * T], requires_grad=True)  # (1, T, 3)
probs = torch.softmax(logits, dim=-1)
label = torch.tensor([[3.0, 1.0, 0.0]])
bs, T_, _ = probs.size()
inp = torch.sum(probs, 1) / T_
loss = (-torch.sum(torch.log(inp) * (label / T_))) / bs
loss.backward()
print("aggregated =", inp.detach(), "loss =", loss.item())
if not torch.isfinite(loss) or not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
