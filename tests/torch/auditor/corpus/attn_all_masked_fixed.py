# Single-head self-attention encoder over padded token batches with a key
# padding mask filled with -inf before the softmax
# (pattern: pytorch/pytorch#41508 "nn.MultiheadAttention causes gradients to
# become NaN under some use cases").
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MaskedSelfAttention(nn.Module):
    def __init__(self, vocab=400, d=32, n_classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.qkv = nn.Linear(d, 3 * d)
        self.cls = nn.Linear(d, n_classes)

    def forward(self, ids, mask):                           # mask: True = real token
        q, k, v = self.qkv(self.emb(ids)).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))
        attn = torch.softmax(scores.masked_fill(~mask[:, None, :], torch.finfo(scores.dtype).min), dim=-1)
        ctx = attn @ v
        m = mask.unsqueeze(-1).float()
        pooled = (ctx * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.cls(pooled)


# batches are padded to a fixed length; some documents are empty after filtering
lengths = torch.randint(0, 10, (96,))
ids = torch.randint(1, 400, (96, 10))
mask = torch.arange(10)[None, :] < lengths[:, None]
ids = ids * mask
labels = torch.randint(0, 3, (96,))

model = MaskedSelfAttention()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    idx = torch.arange(step * 16, step * 16 + 16)
    loss = F.cross_entropy(model(ids[idx], mask[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
