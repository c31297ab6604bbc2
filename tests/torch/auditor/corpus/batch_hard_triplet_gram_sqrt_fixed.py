# Metric learning with batch-hard triplet mining; the pairwise distance matrix
# is computed with the Gram-matrix expansion |a|^2 - 2ab + |b|^2
# (pattern: tilman151/rul-adapt#22 and rsokl/Learning_Python#164 "pairwise_dists
# ... can lead to nans because floating point may produce negative values").
import torch
import torch.nn as nn

torch.manual_seed(0)


def pairwise_distances(emb):
    dot = emb @ emb.t()
    sq = torch.diagonal(dot)
    d2 = sq.unsqueeze(0) - 2.0 * dot + sq.unsqueeze(1)
    return torch.sqrt(d2.clamp(min=0.0) + 1e-12)


def batch_hard_triplet_loss(emb, labels, margin=0.5):
    dist = pairwise_distances(emb)
    same = (labels[:, None] == labels[None, :]).float()
    eye = torch.eye(len(labels))
    hardest_pos = (dist * (same - eye)).max(dim=1).values
    hardest_neg = (dist + dist.max() * same).min(dim=1).values
    return torch.relu(hardest_pos - hardest_neg + margin).mean()


net = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 16))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
centers = torch.randn(8, 24) * 2
labels_all = torch.arange(8).repeat_interleave(20)
X = centers[labels_all] + torch.randn(160, 24)

for step in range(6):
    idx = torch.randperm(160)[:48]
    loss = batch_hard_triplet_loss(net(X[idx]), labels_all[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} triplet loss {loss.item():.4f}")
