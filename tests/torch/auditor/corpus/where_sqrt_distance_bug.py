# Small neural potential for point clouds trained on energies and forces
# (forces = -dE/dpos via autograd); pairwise distances use torch.where to
# "avoid" sqrt at the zero self-distance
# (pattern: pytorch/pytorch#23395 and aiqm/torchani#192).
import torch
import torch.nn as nn

torch.manual_seed(0)


class RadialPotential(nn.Module):
    def __init__(self, n_rbf=16, cutoff=3.0):
        super().__init__()
        self.centers = nn.Parameter(torch.linspace(0.0, cutoff, n_rbf))
        self.mlp = nn.Sequential(nn.Linear(n_rbf, 32), nn.SiLU(), nn.Linear(32, 1))

    def forward(self, pos):                                   # pos: (B, N, 3)
        d2 = ((pos[:, :, None, :] - pos[:, None, :, :]) ** 2).sum(-1)
        d = torch.where(d2 > 0, torch.sqrt(d2), torch.zeros_like(d2))  # ORIGIN
        rbf = torch.exp(-4.0 * (d.unsqueeze(-1) - self.centers) ** 2)
        not_self = 1.0 - torch.eye(pos.size(1))
        feats = (rbf * not_self[..., None]).sum(dim=2)        # (B, N, n_rbf)
        return self.mlp(feats).sum(dim=(1, 2))                # energy per structure


# reference data from a harmonic pair potential E = 0.5 * k * sum_ij |r_i - r_j|^2
k = 0.3
pos_all = torch.rand(40, 6, 3) * 3
diff = pos_all[:, :, None, :] - pos_all[:, None, :, :]
energy_ref = 0.5 * k * (diff ** 2).sum(dim=(1, 2, 3))
forces_ref = -2.0 * k * diff.sum(dim=2)

model = RadialPotential()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    idx = torch.randint(0, 40, (8,))
    pos = pos_all[idx].clone().requires_grad_(True)
    energy = model(pos)
    forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
    loss = ((energy - energy_ref[idx]) ** 2).mean() + ((forces - forces_ref[idx]) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
