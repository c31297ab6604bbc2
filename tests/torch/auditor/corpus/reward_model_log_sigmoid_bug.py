# Pairwise reward model whose forward returns the ranking loss, as in
# DeepSpeed-Chat's RewardModel (pattern: deepspeedai/DeepSpeedExamples#423).
import torch
import torch.nn as nn

torch.manual_seed(0)


class RewardModel(nn.Module):
    def __init__(self, vocab=100, d=32):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, d, mode="mean")
        self.v_head = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))

    def forward(self, chosen_ids, rejected_ids):
        chosen_reward = self.v_head(self.emb(chosen_ids)).squeeze(-1)
        rejected_reward = self.v_head(self.emb(rejected_ids)).squeeze(-1)
        loss = -torch.log(torch.sigmoid(chosen_reward - rejected_reward)).mean()  # ORIGIN
        return loss, chosen_reward, rejected_reward


chosen = torch.randint(0, 50, (128, 12))           # preferred answers use tokens < 50
rejected = torch.randint(40, 100, (128, 12))

model = RewardModel()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(10):
    idx = torch.randint(0, 128, (32,))
    loss, c, r = model(chosen[idx], rejected[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} acc {(c > r).float().mean().item():.2f}")
