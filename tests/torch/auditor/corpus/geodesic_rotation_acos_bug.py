# Rotation regression with the continuous 6D representation (Gram-Schmidt) and
# a geodesic loss acos((tr(R_pred^T R_gt) - 1) / 2)
# (pattern: papagina/RotationContinuity#1 "occasionally the input can be
# slightly larger or smaller than 1 and -1, in that case torch.acos will return nan").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def rotation_from_6d(x):
    a1, a2 = x[:, :3], x[:, 3:]
    b1 = F.normalize(a1, dim=1)
    b2 = F.normalize(a2 - (b1 * a2).sum(1, keepdim=True) * b1, dim=1)
    b3 = torch.cross(b1, b2, dim=1)
    return torch.stack([b1, b2, b3], dim=2)


def geodesic_loss(R_pred, R_gt):
    m = R_pred.transpose(1, 2) @ R_gt
    cos = (torch.diagonal(m, dim1=1, dim2=2).sum(-1) - 1) / 2
    theta = torch.acos(cos)  # ORIGIN
    return theta.mean()


features = torch.randn(200, 10)
R_gt = rotation_from_6d(features[:, :6] + 0.1 * torch.randn(200, 6))
model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 6))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(8):
    idx = torch.randint(0, 200, (32,))
    loss = geodesic_loss(rotation_from_6d(model(features[idx])), R_gt[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} geodesic loss {loss.item():.4f}")
