# exp(CE / eta): a confidently wrong prediction has a finite but large CE
# (here 400), CE / 2 = 200 > 88.7 and exp overflows (the SO answer shows
# torch.exp(F.cross_entropy(torch.tensor([[-50.0, 50.0]]), torch.tensor([0]))) = inf).
import torch
import torch.nn as nn

torch.manual_seed(0)
output = torch.tensor([[-200.0, 200.0, 0.0, 0.0]], requires_grad=True)
loss = torch.exp(nn.CrossEntropyLoss()(output, torch.tensor([0])) / 2)
loss.backward()
print("loss =", loss.item(), "grad =", output.grad)
if not torch.isfinite(loss) or not torch.isfinite(output.grad).all():
    print("TRIGGERED")
