# Sample variance (unbiased, the torch default) across a variant axis of
# length 1: division by N - 1 = 0 -> NaN.
import warnings
import torch

torch.manual_seed(0)
warnings.simplefilter("ignore")
p0 = torch.rand(4, 1, requires_grad=True)
p1 = torch.rand(4, 1)
consistency = (p0 - (1 - p1)).var(dim=-1).mean()
print("consistency =", consistency.item())
if not torch.isfinite(consistency):
    print("TRIGGERED")
