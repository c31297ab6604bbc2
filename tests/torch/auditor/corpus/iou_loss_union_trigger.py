# IoU = I / U: a degenerate ground-truth box (zero height) and a location where
# the ReLU head predicts all-zero distances give U = X + G - I = 0 and 0/0 = NaN.
import torch

torch.manual_seed(0)
pred = torch.zeros(1, 4, requires_grad=True)
target = torch.tensor([[0.0, 0.0, 1.0, 2.0]])
xt, xb, xl, xr = pred.unbind(dim=1)
gt, gb, gl, gr = target.unbind(dim=1)
X = (xt + xb) * (xl + xr)
G = (gt + gb) * (gl + gr)
I = (torch.min(xt, gt) + torch.min(xb, gb)) * (torch.min(xl, gl) + torch.min(xr, gr))
U = X + G - I
iou = I / U
print("U =", U.detach(), "iou =", iou.detach())
if not torch.isfinite(iou).all():
    print("TRIGGERED")
