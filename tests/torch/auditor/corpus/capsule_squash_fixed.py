# Capsule network with primary capsules and the squash non-linearity
# (pattern: jindongwang/Pytorch-CapsuleNet#7 "Undefined Gradients due to
# division by zero").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class CapsNet(nn.Module):
    def __init__(self, n_classes=4, caps_dim=8):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.primary = nn.Conv2d(16, 4 * caps_dim, 5, stride=2)
        self.caps_dim = caps_dim
        self.digit = nn.Linear(4 * 4 * 4 * caps_dim, n_classes * caps_dim)
        self.n_classes = n_classes

    def squash(self, input_tensor):
        squared_norm = (input_tensor ** 2).sum(-1, keepdim=True)
        output_tensor = squared_norm * input_tensor / ((1. + squared_norm) * torch.sqrt(squared_norm + 1e-8))
        return output_tensor

    def forward(self, x):
        u = self.primary(F.relu(self.conv1(x)))                  # (B, 32, 4, 4)
        u = u.view(x.size(0), -1, self.caps_dim)
        u = self.squash(u)
        v = self.squash(self.digit(u.flatten(1)).view(x.size(0), self.n_classes, self.caps_dim))
        return v.norm(dim=-1)                                   # capsule lengths


images = torch.rand(64, 1, 16, 16)
labels = torch.randint(0, 4, (64,))
model = CapsNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    idx = torch.randint(0, 64, (16,))
    lengths = model(images[idx])
    t = F.one_hot(labels[idx], 4).float()
    margin = t * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - t) * F.relu(lengths - 0.1) ** 2
    loss = margin.sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} margin loss {loss.item():.4f}")
