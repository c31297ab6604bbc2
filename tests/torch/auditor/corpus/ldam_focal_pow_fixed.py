# Long-tailed classification with the focal loss as implemented in LDAM-DRW:
# p = exp(-CE), loss = (1 - p) ** gamma * CE with gamma = 0.5
# (pattern: kaidic/LDAM-DRW#17 "Focal loss would lead to nan?").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def focal_loss(input_values, gamma):
    p = torch.exp(-input_values)
    loss = (1 - p).clamp(min=1e-6) ** gamma * input_values
    return loss.mean()


counts = [120, 60, 30, 15, 8]
y = torch.cat([torch.full((c,), k) for k, c in enumerate(counts)])
X = torch.randn(5, 16)[y] + 0.8 * torch.randn(len(y), 16)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
gamma = 0.5
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for epoch in range(4):
    perm = torch.randperm(len(y))
    for i in range(0, len(y), 58):
        idx = perm[i:i + 58]
        ce = F.cross_entropy(model(X[idx]), y[idx], reduction="none")
        loss = focal_loss(ce, gamma)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} focal loss {loss.item():.4f}")
