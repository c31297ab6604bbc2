# Binary classifier with a hand-written binary cross-entropy on sigmoid outputs
# (pattern: discuss.pytorch.org "Manual Calculation of Binary Cross Entropy with logits").
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

X_np = rng.normal(size=(300, 10)).astype(np.float32)
y_np = (X_np[:, 0] + 0.5 * X_np[:, 1] > 0).astype(np.float32)
dataset = TensorDataset(torch.from_numpy(X_np), torch.from_numpy(y_np))
loader = DataLoader(dataset, batch_size=50, shuffle=True)

model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

for epoch in range(4):
    for xb, y in loader:
        out = model(xb).squeeze(1)
        p = torch.sigmoid(out)
        loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # ORIGIN
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    acc = ((p > 0.5).float() == y).float().mean().item()
    print(f"epoch {epoch} bce {loss.item():.4f} acc {acc:.2f}")
