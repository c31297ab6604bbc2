# masked log_softmax over an example whose candidate list is empty (every
# entry masked with -inf): the row is NaN (allennlp#890).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
scores = torch.randn(2, 4, requires_grad=True)
cand_mask = torch.tensor([[True, True, False, False], [False, False, False, False]])
log_probs = F.log_softmax(scores.masked_fill(~cand_mask, float("-inf")), dim=-1)
print(log_probs.detach())
if torch.isnan(log_probs).any():
    print("TRIGGERED")
