# Cosine normalisation w.x / (|w||x|): a feature vector that is all zeros
# after the ReLU (every unit dead for that input) gives 0 / 0 = NaN.
import torch

torch.manual_seed(0)
weight = torch.randn(6, 64, requires_grad=True)
x = torch.relu(-torch.rand(1, 64))          # all-zero post-ReLU features
cos = (x @ weight.t()) / (x.norm(dim=1, keepdim=True) * weight.norm(dim=1))
print("cos =", cos.detach())
if not torch.isfinite(cos).all():
    print("TRIGGERED")
