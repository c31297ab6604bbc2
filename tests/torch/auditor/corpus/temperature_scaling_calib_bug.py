# Post-hoc temperature scaling (Guo et al. 2017): a classifier is trained, then
# a single temperature is fitted on held-out logits by minimising the NLL
# (pattern: gpleiss/temperature_scaling#31, nothing keeps T positive).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ModelWithTemperature(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.temperature = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, x):
        logits = self.model(x)
        return logits / self.temperature  # ORIGIN


base = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3))
X_train, X_val = torch.randn(300, 10), torch.randn(100, 10)
w = torch.randn(10, 3)
y_train, y_val = (X_train @ w).argmax(1), (X_val @ w).argmax(1)

opt = torch.optim.Adam(base.parameters(), lr=1e-2)
for step in range(30):
    loss = F.cross_entropy(base(X_train), y_train)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"base model loss {loss.item():.4f}")

scaled = ModelWithTemperature(base)
t_opt = torch.optim.SGD([scaled.temperature], lr=0.01)
for step in range(20):
    nll = F.cross_entropy(scaled(X_val), y_val)
    t_opt.zero_grad()
    nll.backward()
    t_opt.step()
print(f"val nll {nll.item():.4f} temperature {scaled.temperature.item():.3f}")
