# Fully-connected VAE with the usual reparameterisation and analytic KL term
# (pattern: pytorch/examples vae; "logvar.exp() goes to infinity").
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class VAE(nn.Module):
    def __init__(self, d=64, h=32, z=4):
        super().__init__()
        self.enc = nn.Linear(d, h)
        self.fc_mu = nn.Linear(h, z)
        self.fc_logvar = nn.Linear(h, z)
        self.dec = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, d))

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def forward(self, x):
        h = F.relu(self.enc(x))
        mu, logvar = self.fc_mu(h), self.fc_logvar(h).clamp(-30.0, 20.0)
        z = self.reparameterize(mu, logvar)
        return torch.sigmoid(self.dec(z)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


data = (torch.rand(256, 64) > 0.7).float()
loader = DataLoader(TensorDataset(data), batch_size=32, shuffle=True)
model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    total = 0.0
    for (xb,) in loader:
        recon, mu, logvar = model(xb)
        loss = loss_function(recon, xb, mu, logvar)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch} loss {total / len(data):.3f}")
