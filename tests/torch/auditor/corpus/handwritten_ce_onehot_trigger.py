# -(y * log(p)).sum() with p = softmax(z): a confidently wrong prediction
# (finite logit gap > ~104) makes p underflow to exactly 0, log(0) = -inf and
# 0 * -inf = NaN for the classes with y = 0.
import torch

torch.manual_seed(0)
z = torch.tensor([[150.0, 0.0, -2.0]], requires_grad=True)
y_prob = torch.softmax(z, dim=1)
y_onehot = torch.tensor([[0.0, 1.0, 0.0]])
loss = -(y_onehot * torch.log(y_prob)).sum(dim=1).mean()
loss.backward()
print("loss =", loss.item(), "grad =", z.grad)
if not torch.isfinite(loss) or not torch.isfinite(z.grad).all():
    print("TRIGGERED")
