# Variational inference with a stack of planar flows (Rezende & Mohamed 2015)
# fitted to a 2-D mixture target by minimising the reverse KL
# (pattern: ex4sperans/variational-inference-with-normalizing-flows#2 - the
# naive planar flow is not guaranteed invertible, det(J) = 1 + u^T psi can be 0).
import math
import torch
import torch.nn as nn

torch.manual_seed(0)


class PlanarFlow(nn.Module):
    def __init__(self, dim=2):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, dim) * 0.1)
        self.u = nn.Parameter(torch.randn(1, dim) * 0.1)
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, z):
        lin = z @ self.w.t() + self.b                         # (B, 1)
        f = z + self.u * torch.tanh(lin)
        psi = (1 - torch.tanh(lin) ** 2) * self.w             # (B, dim)
        log_det = torch.log(torch.abs(1 + psi @ self.u.t()) + 1e-8)
        return f, log_det.squeeze(-1)


def log_target(z):
    means = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])
    sq = ((z[:, None, :] - means[None]) ** 2).sum(-1)        # (B, 2)
    return torch.logsumexp(-0.5 * sq / 0.36, dim=1)


flows = nn.ModuleList([PlanarFlow() for _ in range(6)])
optimizer = torch.optim.Adam(flows.parameters(), lr=1e-2)
for step in range(10):
    z = torch.randn(128, 2)
    log_q = -0.5 * (z ** 2).sum(1) - math.log(2 * math.pi)
    for flow in flows:
        z, log_det = flow(z)
        log_q = log_q - log_det
    loss = (log_q - log_target(z)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} reverse KL {loss.item():.4f}")
