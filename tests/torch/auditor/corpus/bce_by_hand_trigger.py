# Hand-written BCE: sigmoid(20.) rounds to exactly 1.0 in float32, so
# log(1 - p) = -inf and (1 - y) * -inf = 0 * -inf = NaN for a positive example.
import torch

torch.manual_seed(0)
out = torch.tensor([20.0, -1.0], requires_grad=True)
y = torch.tensor([1.0, 0.0])
p = torch.sigmoid(out)
loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
loss.backward()
print("p =", p.detach(), "loss =", loss.item(), "grad =", out.grad)
if not torch.isfinite(loss) or not torch.isfinite(out.grad).all():
    print("TRIGGERED")
