# Siamese network trained with the contrastive loss of Hadsell et al.; the
# Euclidean distance is written as sqrt(sum((o1 - o2)**2))
# (pattern: huggingface/sentence-transformers#4033 "Identical dense embeddings
# have zero Euclidean distance but produce NaN gradients").
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x1, x2):
        return self.net(x1), self.net(x2)


def contrastive_loss(o1, o2, same, margin=2.0):
    d = torch.sqrt(torch.sum((o1 - o2) ** 2, dim=1))  # ORIGIN
    return (same * d.pow(2) + (1 - same) * torch.relu(margin - d).pow(2)).mean()


base = torch.randn(200, 16)
same = (torch.rand(200) < 0.5).float()
other = base + same[:, None] * 0.3 * torch.randn(200, 16) + (1 - same[:, None]) * torch.randn(200, 16)
loader = DataLoader(TensorDataset(base, other, same), batch_size=25, shuffle=True)

model = Siamese()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for x1, x2, s in loader:
        o1, o2 = model(x1, x2)
        loss = contrastive_loss(o1, o2, s)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} contrastive loss {loss.item():.4f}")
