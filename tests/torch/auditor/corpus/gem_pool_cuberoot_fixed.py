# Image-retrieval style CNN with generalised-mean (GeM) pooling, p = 3,
# written as (mean(x ** p) + 1e-12) ** (1 / p)
# (pattern: blog.csdn.net/qq_38507163/article/details/111181447, "nan from a
# pooling op: fractional power of a negative number").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GeMNet(nn.Module):
    def __init__(self, n_classes=6, p=3.0):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, padding=1))
        self.p = p
        self.fc = nn.Linear(32, n_classes)

    def forward(self, x):
        x_i = self.features(x).flatten(2)                         # (B, C, H*W)
        x_i = (torch.mean(x_i.clamp(min=1e-6) ** self.p, dim=-1) + 1e-12) ** (1 / self.p)
        return self.fc(x_i)


images = torch.randn(48, 3, 12, 12)
labels = torch.randint(0, 6, (48,))
model = GeMNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    idx = torch.randint(0, 48, (12,))
    loss = F.cross_entropy(model(images[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
