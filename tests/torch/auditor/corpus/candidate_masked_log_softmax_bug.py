# Candidate selection (e.g. entity linking / answer selection): each example
# scores a fixed-size list of candidates, invalid candidates are masked out and
# the loss is the NLL of the gold candidate
# (pattern: allenai/allennlp#890 "util.masked_log_softmax() Returning Nan's").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class CandidateScorer(nn.Module):
    def __init__(self, d=24):
        super().__init__()
        self.query = nn.Sequential(nn.Linear(d, 32), nn.Tanh(), nn.Linear(32, d))

    def forward(self, ctx, cands):                           # (B, d), (B, K, d)
        return (cands @ self.query(ctx).unsqueeze(-1)).squeeze(-1)   # (B, K)


B, K, d = 128, 8, 24
ctx = torch.randn(B, d)
cands = torch.randn(B, K, d)
n_valid = torch.randint(1, K + 1, (B,))
cand_mask = torch.arange(K)[None, :] < n_valid[:, None]
gold = (torch.rand(B) * n_valid).long()
cands[torch.arange(B), gold] += ctx                        # gold candidate resembles the context

model = CandidateScorer(d)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(4):
    for i in range(0, B, 32):
        sl = slice(i, i + 32)
        scores = model(ctx[sl], cands[sl])
        log_probs = F.log_softmax(scores.masked_fill(~cand_mask[sl], float("-inf")), dim=-1)  # ORIGIN
        loss = -log_probs.gather(1, gold[sl, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} nll {loss.item():.4f}")
