# Geodesic distance of a predicted rotation that equals the target (the
# network output reproduces the ground-truth 6D vector): in float32 the
# trace of R^T R rounds to slightly more than 3, (trace - 1) / 2 > 1 and
# acos returns NaN (papagina/RotationContinuity#1).
import torch
import torch.nn.functional as F

torch.manual_seed(0)

def rotation_from_6d(x):
    a1, a2 = x[:, :3], x[:, 3:]
    b1 = F.normalize(a1, dim=1)
    b2 = F.normalize(a2 - (b1 * a2).sum(1, keepdim=True) * b1, dim=1)
    return torch.stack([b1, b2, torch.cross(b1, b2, dim=1)], dim=2)


a = torch.tensor([[0.3986871838569641, -0.19871552288532257, -1.1559407711029053,
                   -0.3166695237159729, 0.9402980804443359, -1.1469545364379883]], requires_grad=True)
R_pred = rotation_from_6d(a)
R_gt = rotation_from_6d(a.detach())
m = R_pred.transpose(1, 2) @ R_gt
cos = (torch.diagonal(m, dim1=1, dim2=2).sum(-1) - 1) / 2
theta = torch.acos(cos)
print("cos - 1 =", (cos - 1).item(), "theta =", theta.item())
if not torch.isfinite(theta).all():
    print("TRIGGERED")
