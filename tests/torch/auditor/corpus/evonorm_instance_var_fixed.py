# Small CNN using an EvoNorm-S0 style normalisation-activation layer, whose
# instance standard deviation is sqrt(var over H, W + eps)
# (pattern: digantamisra98/EvoNorm#4 "NaN when width=channel=1").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def instance_std(x, eps=1e-5):
    var = torch.var(x, dim=(2, 3), keepdim=True, unbiased=False)
    return torch.sqrt(var + eps)


class EvoNormS0(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(1, c, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.v = nn.Parameter(torch.ones(1, c, 1, 1))

    def forward(self, x):
        num = x * torch.sigmoid(self.v * x)
        return num / instance_std(x) * self.gamma + self.beta


class Net(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 16, 3, stride=2, padding=1), EvoNormS0(16)
        self.c2, self.n2 = nn.Conv2d(16, 32, 3, stride=2, padding=1), EvoNormS0(32)
        self.fc = nn.Linear(32, n_classes)

    def forward(self, x):
        x = self.n1(self.c1(x))
        x = self.n2(self.c2(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


images = torch.randn(64, 3, 16, 16)
labels = torch.randint(0, 5, (64,))
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(6):
    idx = torch.randint(0, 64, (16,))
    loss = F.cross_entropy(model(images[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
