# Planar flow log|det J| = log|1 + u^T psi(z)|: for u = -w / |w|^2 and a point
# on the hyperplane w^T z + b = 0 (tanh' = 1) the Jacobian is singular,
# 1 + u^T psi = 0 and log(0) = -inf.
import torch

torch.manual_seed(0)
w = torch.tensor([[1.0, 0.0]])
u = torch.tensor([[-1.0, 0.0]], requires_grad=True)
b = torch.zeros(1)
z = torch.tensor([[0.0, 0.7]])
lin = z @ w.t() + b
psi = (1 - torch.tanh(lin) ** 2) * w
log_det = torch.log(torch.abs(1 + psi @ u.t()))
print("log_det =", log_det.item())
if not torch.isfinite(log_det).all():
    print("TRIGGERED")
