# Bag-of-embeddings text classifier with masked mean pooling over the tokens
# (pattern: jsboige/CoursIA#15074, sentence-embedding mean pooling with
# `(h * mask).sum(1) / mask.sum(1)`).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MeanPoolClassifier(nn.Module):
    def __init__(self, vocab=500, d=32, n_classes=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.proj = nn.Linear(d, d)
        self.cls = nn.Linear(d, n_classes)

    def forward(self, ids, attention_mask):
        h = torch.tanh(self.proj(self.emb(ids)))
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (h * mask).sum(dim=1) / mask.sum(dim=1)  # ORIGIN
        return self.cls(pooled)


# variable-length "sentences"; some raw texts are empty after cleaning
lengths = torch.randint(0, 12, (64,))
max_len = 12
ids = torch.randint(1, 500, (64, max_len))
attention_mask = (torch.arange(max_len)[None, :] < lengths[:, None]).long()
ids = ids * attention_mask
labels = (ids[:, 0] % 2)

model = MeanPoolClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    idx = torch.arange(step * 10, step * 10 + 16) % 64
    loss = F.cross_entropy(model(ids[idx], attention_mask[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
