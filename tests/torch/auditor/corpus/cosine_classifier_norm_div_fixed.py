# Classifier with a cosine-normalised last layer (CosNorm): logits are
# s * w.x / (|w| |x|) (pattern: discuss.pytorch.org "How to debug NaN gradients
# in custom Cosine Normalization implementation").
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class CosNormLinear(nn.Module):
    def __init__(self, d_in, n_out, scale=10.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, d_in) * 0.1)
        self.scale = scale

    def forward(self, x):
        cos = F.linear(F.normalize(x, dim=1), F.normalize(self.weight, dim=1))
        return self.scale * cos


model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), CosNormLinear(64, 6))
X = torch.randn(240, 20)
y = torch.randint(0, 6, (240,))
loader = DataLoader(TensorDataset(X, y), batch_size=40, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(3):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
