# acos of a cosine computed from normalised vectors: when an embedding is
# aligned with its class weight the cosine is exactly 1.0 (or rounds to
# slightly above 1); acos'(1) = -1/sqrt(1 - 1) = -inf, so the gradient is
# non-finite (pytorch/pytorch#8069); values above 1 give NaN.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
w = torch.randn(3, 16)
w[1] = 0.0
w[1, 0] = 2.0                                   # class-1 weight along e_0
x = torch.zeros(1, 16)
x[0, 0] = 3.0                                   # embedding parallel to it
x.requires_grad_(True)
cosine = F.linear(F.normalize(x), F.normalize(w))
theta = torch.acos(cosine)
theta.sum().backward()
print("cosine[1] = %.9f" % cosine[0, 1].item(), "theta =", theta.detach(), "grad =", x.grad[0, :3])
if not torch.isfinite(theta).all() or not torch.isfinite(x.grad).all():
    print("TRIGGERED")
