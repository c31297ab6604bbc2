# CLIP/CLAP-style dual encoder trained with a symmetric InfoNCE loss and a
# learnable temperature (pattern: cfoster0/CLAP#28 "Learned temperature should clip").
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DualEncoder(nn.Module):
    def __init__(self, d_a=20, d_b=30, d=16):
        super().__init__()
        self.enc_a = nn.Sequential(nn.Linear(d_a, 32), nn.ReLU(), nn.Linear(32, d))
        self.enc_b = nn.Sequential(nn.Linear(d_b, 32), nn.ReLU(), nn.Linear(32, d))
        self.temperature = nn.Parameter(torch.tensor(0.07))

    def forward(self, a, b):
        za = F.normalize(self.enc_a(a), dim=-1)
        zb = F.normalize(self.enc_b(b), dim=-1)
        logits = za @ zb.t() / self.temperature.clamp(min=0.01)
        return logits


latent = torch.randn(256, 8)
audio = latent @ torch.randn(8, 20) + 0.1 * torch.randn(256, 20)
text = latent @ torch.randn(8, 30) + 0.1 * torch.randn(256, 30)

model = DualEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(8):
    idx = torch.randint(0, 256, (32,))
    logits = model(audio[idx], text[idx])
    target = torch.arange(32)
    loss = 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} T {model.temperature.item():.4f}")
