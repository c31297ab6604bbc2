# sqrt(MSE) on a batch that is fitted exactly (MSE == 0): d sqrt/dx = inf at 0
# and the chain rule gives 0 * inf = NaN (discuss.pytorch.org thread 94875).
import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(1, 1, requires_grad=True)
y = torch.zeros(1, 1)
loss = torch.sqrt(nn.MSELoss()(x * 0, y))
loss.backward()
print("loss =", loss.item(), "grad =", x.grad)
if not torch.isfinite(x.grad).all():
    print("TRIGGERED")
