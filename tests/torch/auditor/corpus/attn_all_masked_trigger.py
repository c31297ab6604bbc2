# softmax over a row where every key is masked with -inf: exp(-inf - (-inf))
# = exp(nan) -> the whole row is NaN.
import torch

torch.manual_seed(0)
scores = torch.randn(2, 3, 3, requires_grad=True)
mask = torch.tensor([[True, True, False], [False, False, False]])
attn = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
print(attn[1])
if not torch.isfinite(attn).all():
    print("TRIGGERED")
