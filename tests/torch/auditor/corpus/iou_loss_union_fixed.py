# Dense box regression with an IoU loss in the UnitBox parameterisation: every
# location predicts its distances (top, bottom, left, right) to the box edges
# (pattern: zhimingluo/UnitBox_TF#6, "reproduced IOUloss by pytorch ... got NaN").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def iou_loss(pred, target):
    xt, xb, xl, xr = pred.unbind(dim=1)
    gt, gb, gl, gr = target.unbind(dim=1)
    X = (xt + xb) * (xl + xr)
    G = (gt + gb) * (gl + gr)
    Ih = torch.min(xt, gt) + torch.min(xb, gb)
    Iw = torch.min(xl, gl) + torch.min(xr, gr)
    I = Ih * Iw
    U = X + G - I
    iou = I / U.clamp(min=1e-6)
    return (1.0 - iou).mean()


head = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)

feats = torch.randn(512, 16)
dist = F.softplus(feats[:, :4] * 2) + 0.1
dist[::50, :2] = 0.0           # a few degenerate (zero-height) annotated boxes

for step in range(8):
    idx = torch.randint(0, 512, (64,))
    pred = F.relu(head(feats[idx]))     # distances must be non-negative
    loss = iou_loss(pred, dist[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} iou loss {loss.item():.4f}")
