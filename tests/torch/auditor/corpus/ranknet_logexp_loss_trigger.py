# log(1 + exp(gap)) with a finite reward gap of 100: exp overflows, the loss is
# inf and the gradient NaN (OpenRLHF#1278: "gap=100 loss=inf grad=nan").
import torch

torch.manual_seed(0)
chosen = torch.tensor([-50.0], requires_grad=True)
reject = torch.tensor([50.0])
loss = torch.log(1 + torch.exp(reject - chosen)).mean()
loss.backward()
print("loss =", loss.item(), "grad =", chosen.grad)
if not torch.isfinite(loss) or not torch.isfinite(chosen.grad).all():
    print("TRIGGERED")
