# MLP classifier trained with NLLLoss (pattern: pytorch/pytorch#1620).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, d_in=20, d_hidden=64, n_classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(),
                                 nn.Linear(d_hidden, n_classes))

    def forward(self, x):
        return self.net(x)


X = torch.randn(256, 20)
y = (X[:, :5].argmax(dim=1) + (X[:, 5] > 1).long()) % 5
loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)

model = MLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
sm = nn.Softmax(dim=1)
crit = nn.NLLLoss()

for epoch in range(3):
    correct = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        logits = model(xb)
        probs = sm(logits)
        loss = crit(torch.log(probs), yb)  # ORIGIN
        loss.backward()
        optimizer.step()
        correct += (probs.argmax(dim=1) == yb).sum().item()
    print(f"epoch {epoch} loss {loss.item():.4f} acc {correct / len(X):.3f}")
