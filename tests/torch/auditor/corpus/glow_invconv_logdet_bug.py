# Glow-style normalising flow on small images: invertible 1x1 convolution
# followed by an affine coupling layer, trained by maximum likelihood
# (pattern: chaiyujin/glow-pytorch#7:
#  dlogdet = torch.log(torch.abs(torch.det(self.weight))) * pixels).
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class InvConv2d(nn.Module):
    def __init__(self, c):
        super().__init__()
        w = torch.linalg.qr(torch.randn(c, c))[0]
        self.weight = nn.Parameter(w)

    def forward(self, x):
        pixels = x.size(2) * x.size(3)
        out = F.conv2d(x, self.weight.unsqueeze(2).unsqueeze(3))
        dlogdet = torch.log(torch.abs(torch.det(self.weight))) * pixels  # ORIGIN
        return out, dlogdet


class AffineCoupling(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c // 2, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, c, 3, padding=1))

    def forward(self, x):
        xa, xb = x.chunk(2, dim=1)
        h_s, t = self.net(xa).chunk(2, dim=1)
        log_s = F.logsigmoid(h_s + 2.0)
        yb = (xb + t) * torch.exp(log_s)
        return torch.cat([xa, yb], dim=1), log_s.flatten(1).sum(1)


class Glow(nn.Module):
    def __init__(self, c=4, n_steps=3):
        super().__init__()
        self.steps = nn.ModuleList()
        for _ in range(n_steps):
            self.steps.append(InvConv2d(c))
            self.steps.append(AffineCoupling(c))

    def forward(self, x):
        logdet = torch.zeros(x.size(0))
        for step in self.steps:
            x, ld = step(x)
            logdet = logdet + ld
        return x, logdet


images = torch.rand(64, 4, 8, 8) - 0.5
model = Glow()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for it in range(6):
    idx = torch.randint(0, 64, (16,))
    z, logdet = model(images[idx])
    log_pz = (-0.5 * z ** 2 - 0.5 * math.log(2 * math.pi)).flatten(1).sum(1)
    loss = -(log_pz + logdet).mean() / (4 * 8 * 8)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} nll/dim {loss.item():.4f}")
