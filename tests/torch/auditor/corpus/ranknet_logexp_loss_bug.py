# Pairwise learning-to-rank (RankNet style) with a log-exp pairwise loss module
# (pattern: OpenRLHF/OpenRLHF#1278, LogExpLoss).
import torch
import torch.nn as nn

torch.manual_seed(0)


class LogExpLoss(nn.Module):
    def forward(self, chosen_reward, reject_reward):
        loss = torch.log(1 + torch.exp(reject_reward - chosen_reward)).mean()  # ORIGIN
        return loss


scorer = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = LogExpLoss()
optimizer = torch.optim.Adam(scorer.parameters(), lr=1e-2)

w_true = torch.randn(12)
items_a = torch.randn(300, 12)
items_b = torch.randn(300, 12)
a_better = (items_a @ w_true > items_b @ w_true).unsqueeze(1)
winners = torch.where(a_better, items_a, items_b)
losers = torch.where(a_better, items_b, items_a)

for epoch in range(5):
    for i in range(0, 300, 60):
        loss = criterion(scorer(winners[i:i + 60]), scorer(losers[i:i + 60]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} pairwise loss {loss.item():.4f}")
