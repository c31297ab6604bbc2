# Tabular/pixel regression: features are standardised per column before
# training (pattern: StackOverflow q. 58961923 "Standardize pixel input data
# with many zeros" - "if the first feature of all samples is zero then std = 0").
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

# 8x8 "images" flattened; the border pixels are always 0 in this data set
img = rng.integers(0, 255, size=(200, 8, 8)).astype(np.float32)
img[:, 0, :] = 0
img[:, :, 0] = 0
target = img[:, 3:5, 3:5].mean(axis=(1, 2)) / 255.0

X = torch.from_numpy(img.reshape(200, 64))
X = (X - X.mean(0)) / X.std(0)  # ORIGIN
y = torch.from_numpy(target.astype(np.float32))
loader = DataLoader(TensorDataset(X, y), batch_size=25, shuffle=True)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb).squeeze(1), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} mse {loss.item():.4f}")
