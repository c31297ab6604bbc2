# torch.log(softmax(logits)) with a finite logit gap > ~104: the softmax entry
# underflows to 0, log gives -inf, the NLL loss is inf and its gradient NaN.
import torch
import torch.nn as nn

torch.manual_seed(0)
logits = torch.tensor([[0.0, 120.0, -3.0]], requires_grad=True)
probs = nn.Softmax(dim=1)(logits)
loss = nn.NLLLoss()(torch.log(probs), torch.tensor([0]))
loss.backward()
print("log(probs) =", torch.log(probs).detach(), "loss =", loss.item(), "grad =", logits.grad)
if not torch.isfinite(loss) or not torch.isfinite(logits.grad).all():
    print("TRIGGERED")
