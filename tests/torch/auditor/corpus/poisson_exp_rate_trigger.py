# exp(log_rate) overflows for a finite log-rate > ~88.7: the loss is inf and the
# gradient inf.
import torch

torch.manual_seed(0)
log_rate = torch.tensor([95.0, 0.5], requires_grad=True)
y = torch.tensor([3.0, 2.0])
loss = (torch.exp(log_rate) - y * log_rate).mean()
loss.backward()
print("loss =", loss.item(), "grad =", log_rate.grad)
if not torch.isfinite(loss) or not torch.isfinite(log_rate.grad).all():
    print("TRIGGERED")
