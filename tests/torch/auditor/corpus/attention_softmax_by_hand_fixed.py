# Tiny self-attention encoder whose attention weights are normalised with a
# hand-written softmax (pattern: bowang-lab/Transformer-GCN-QA#22, which fixed a
# NaN by "switching over to PyTorch's LogSoftmax in place of our own softmax").
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SelfAttentionClassifier(nn.Module):
    def __init__(self, vocab=200, d=32, n_classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, n_classes)

    def forward(self, tokens):
        x = self.emb(tokens)
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(x.size(-1))
        weights = torch.softmax(scores, dim=-1)
        ctx = weights @ self.v(x)
        return self.out(ctx.mean(dim=1))


tokens = torch.randint(0, 200, (128, 16))
labels = (tokens[:, 0] % 3)
model = SelfAttentionClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(10):
    idx = torch.randint(0, 128, (32,))
    loss = F.cross_entropy(model(tokens[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
