# log|det W| for a 1x1-conv weight that has become singular (two equal rows):
# det = 0 and log(0) = -inf.
import torch

torch.manual_seed(0)
weight = torch.tensor([[1.0, 2.0, 0.0, 0.0],
                       [1.0, 2.0, 0.0, 0.0],
                       [0.0, 0.0, 1.0, 0.0],
                       [0.0, 0.0, 0.0, 1.0]], requires_grad=True)
dlogdet = torch.log(torch.abs(torch.det(weight))) * 64
print("det =", torch.det(weight).item(), "dlogdet =", dlogdet.item())
if not torch.isfinite(dlogdet):
    print("TRIGGERED")
