# Face-embedding style training with an ArcFace (additive angular margin) head
# that recovers the angle with torch.acos (pattern: pytorch/pytorch#8069
# "About Nan error using acos() function", ronghuaiyang/arcface-pytorch#68).
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ArcMarginProduct(nn.Module):
    def __init__(self, d, n_classes, s=16.0, m=0.3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_classes, d) * 0.1)
        self.s, self.m = s, m

    def forward(self, x, label):
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        theta = torch.acos(cosine)  # ORIGIN
        target_logit = torch.cos(theta + self.m)
        one_hot = F.one_hot(label, cosine.size(1)).float()
        return self.s * (one_hot * target_logit + (1.0 - one_hot) * cosine)


backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
head = ArcMarginProduct(16, 10)
params = list(backbone.parameters()) + list(head.parameters())
optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)

ids = torch.randint(0, 10, (300,))
X = torch.randn(10, 32)[ids] + 0.3 * torch.randn(300, 32)
for step in range(8):
    idx = torch.randint(0, 300, (50,))
    logits = head(backbone(X[idx]), ids[idx])
    loss = F.cross_entropy(logits, ids[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} arcface loss {loss.item():.4f}")
