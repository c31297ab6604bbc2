# (X - X.mean(0)) / X.std(0) with a constant column: 0 / 0 = NaN.
import torch

torch.manual_seed(0)
X = torch.tensor([[0.0, 1.0, 5.0], [0.0, 2.0, 3.0], [0.0, 4.0, 1.0]])
Z = (X - X.mean(0)) / X.std(0)
print(Z)
if not torch.isfinite(Z).all():
    print("TRIGGERED")
