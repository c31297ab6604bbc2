# Poisson regression of event counts: the network predicts a log-rate and the
# loss is the Poisson negative log-likelihood written out by hand
# (pattern: tensorflow/tensorflow#47019, log_poisson_loss returning NaN).
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

X_np = rng.normal(size=(500, 6)).astype(np.float32)
rate = np.exp(0.3 * X_np[:, 0] - 0.2 * X_np[:, 1] + 1.0)
counts_np = rng.poisson(rate).astype(np.float32)
loader = DataLoader(TensorDataset(torch.tensor(X_np), torch.tensor(counts_np)),
                    batch_size=50, shuffle=True)

model = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
for epoch in range(4):
    for xb, y in loader:
        log_rate = model(xb).squeeze(1)
        loss = (torch.exp(log_rate) - y * log_rate).mean()  # ORIGIN
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} poisson nll {loss.item():.4f}")
