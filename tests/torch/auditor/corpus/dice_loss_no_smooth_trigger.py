# Soft Dice without smoothing on an empty ground-truth mask: if the network is
# confidently "empty" (logits < ~-104, sigmoid underflows to 0) the
# denominator p.sum() + target.sum() is exactly 0 -> 0 / 0 = NaN.
import torch

torch.manual_seed(0)
logits = torch.full((1, 1, 4, 4), -120.0, requires_grad=True)
target = torch.zeros(1, 1, 4, 4)
p = torch.sigmoid(logits)
inter = (p * target).sum(dim=(1, 2, 3))
dice = 2.0 * inter / (p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3)))
loss = 1.0 - dice.mean()
loss.backward()
print("dice =", dice.detach(), "grad finite:", torch.isfinite(logits.grad).all().item())
if not torch.isfinite(loss) or not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
