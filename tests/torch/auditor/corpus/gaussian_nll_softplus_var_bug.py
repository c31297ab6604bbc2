# Heteroscedastic regression: the model predicts a mean and a variance
# (softplus head) and returns the Gaussian negative log-likelihood from its
# forward when targets are given (pattern: mllam/neural-lam#537).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class ProbRegressor(nn.Module):
    def __init__(self, d_in=4, d_hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU())
        self.mean_head = nn.Linear(d_hidden, 1)
        self.var_head = nn.Linear(d_hidden, 1)

    def forward(self, x, y=None):
        h = self.body(x)
        mu = self.mean_head(h).squeeze(-1)
        var = F.softplus(self.var_head(h)).squeeze(-1)
        if y is None:
            return mu, var
        nll = 0.5 * (torch.log(var) + (y - mu) ** 2 / var).mean()  # ORIGIN
        return nll


X = torch.rand(400, 4) * 4 - 2
y = torch.sin(X[:, 0]) + 0.1 * (1 + X[:, 1].abs()) * torch.randn(400)
loader = DataLoader(TensorDataset(X, y), batch_size=40, shuffle=True)

model = ProbRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(4):
    for xb, yb in loader:
        loss = model(xb, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} nll {loss.item():.4f}")
