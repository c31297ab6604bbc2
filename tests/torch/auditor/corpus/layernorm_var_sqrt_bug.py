# Token classifier with a hand-written LayerNorm over embeddings, normalising
# by (sqrt(var) + eps) (pattern: pyg-team/pytorch_geometric#2917 "Numerical
# error in LayerNorm leading to NaN in gradients": out = x / (var.sqrt() + eps)).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return self.gamma * (x - mean) / (var.sqrt() + self.eps) + self.beta  # ORIGIN


class Tagger(nn.Module):
    def __init__(self, vocab=300, d=32, n_tags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.norm = LayerNorm(d)
        self.ff = nn.Linear(d, n_tags)

    def forward(self, ids):
        return self.ff(self.norm(self.emb(ids)))


ids = torch.randint(1, 300, (64, 10))
ids[:, 7:] = 0                      # padded positions
tags = torch.randint(0, 5, (64, 10))
tags[:, 7:] = -100                  # ignored by the loss

model = Tagger()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    idx = torch.randint(0, 64, (16,))
    logits = model(ids[idx])
    loss = F.cross_entropy(logits.reshape(-1, 5), tags[idx].reshape(-1), ignore_index=-100)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
