# Regression trained on RMSE = sqrt(MSE)
# (pattern: discuss.pytorch.org "Function 'MseLossBackward' returned nan values").
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

X = torch.randn(200, 5)
y = X @ torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.1 * torch.randn(200)
loader = DataLoader(TensorDataset(X, y.unsqueeze(1)), batch_size=20, shuffle=True)

model = nn.Linear(5, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(4):
    for xb, yb in loader:
        pred = model(xb)
        loss = torch.sqrt(criterion(pred, yb) + 1e-8)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} rmse {loss.item():.4f}")
