# Aggregation Cross-Entropy (ACE) for sequence recognition: per-frame softmax
# probabilities are summed over time and compared with character counts
# (pattern: summerlvsong/Aggregation-Cross-Entropy#2).
import torch
import torch.nn as nn

torch.manual_seed(0)


class FrameClassifier(nn.Module):
    def __init__(self, d_in=16, n_classes=12):
        super().__init__()
        self.rnn = nn.GRU(d_in, 32, batch_first=True)
        self.out = nn.Linear(32, n_classes)

    def forward(self, x):
        h, _ = self.rnn(x)
        return torch.softmax(self.out(h), dim=-1)  # (B, T, C)


class ACE(nn.Module):
    def forward(self, input, label):
        bs, T_, _ = input.size()
        input = torch.sum(input, 1)
        input = input / T_
        label = label / T_
        loss = (-torch.sum(torch.log(input) * label)) / bs  # ORIGIN
        return loss


B, T, C = 16, 20, 12
frames = torch.randn(64, T, 16)
# character counts per class (class 0 = blank gets the remaining frames)
counts = torch.randint(0, 2, (64, C)).float()
counts[:, 0] = 0
counts[:, 0] = T - counts.sum(1)

model = FrameClassifier(n_classes=C)
criterion = ACE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(6):
    idx = torch.randint(0, 64, (B,))
    probs = model(frames[idx])
    loss = criterion(probs, counts[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} ace loss {loss.item():.4f}")
