# KL term of a VAE: logvar.exp() overflows to inf for logvar > ~88.7 (a finite
# encoder output), the KL is -inf*(-0.5)=inf and the gradient NaN.
import torch

torch.manual_seed(0)
mu = torch.zeros(1, 4)
logvar = torch.tensor([[100.0, 0.0, 0.0, 0.0]], requires_grad=True)
KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
KLD.backward()
print("KLD =", KLD.item(), "grad =", logvar.grad)
if not torch.isfinite(KLD) or not torch.isfinite(logvar.grad).all():
    print("TRIGGERED")
