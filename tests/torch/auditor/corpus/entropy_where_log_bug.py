# Classifier with an entropy regulariser on its predictive distribution; the
# 0 * log 0 case is "handled" with torch.where
# (pattern: pytorch/pytorch#108618 "Backward bypassing for torch.where").
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 6))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
X = torch.randn(240, 12)
y = torch.randint(0, 6, (240,))
loader = DataLoader(TensorDataset(X, y), batch_size=48, shuffle=True)
beta = 0.1

for epoch in range(3):
    for xb, yb in loader:
        logits = model(xb)
        p = F.softmax(logits, dim=1)
        ent = -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum(dim=1).mean()  # ORIGIN
        loss = F.cross_entropy(logits, yb) - beta * ent
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f} entropy {ent.item():.4f}")
