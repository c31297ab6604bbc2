# sqrt(|a|^2 - 2 a.b + |b|^2): the diagonal of the Gram expansion is 0 up to
# rounding -- exactly 0 (backward of sqrt = inf, times 0 = NaN) or slightly
# negative (sqrt = NaN in the forward value).
import torch

torch.manual_seed(0)
emb = torch.randn(32, 16, requires_grad=True)
dot = emb @ emb.t()
sq = torch.diagonal(dot)
d2 = sq.unsqueeze(0) - 2.0 * dot + sq.unsqueeze(1)
dist = torch.sqrt(d2)
dist.sum().backward()
print("diagonal of d2:", torch.diagonal(d2)[:6].detach())
print("non-finite values:", (~torch.isfinite(dist)).sum().item(),
      "non-finite grads:", (~torch.isfinite(emb.grad)).sum().item())
if not torch.isfinite(dist).all() or not torch.isfinite(emb.grad).all():
    print("TRIGGERED")
