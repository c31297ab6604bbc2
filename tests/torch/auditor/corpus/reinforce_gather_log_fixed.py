# REINFORCE on a logged contextual bandit: the policy network outputs action
# probabilities and the stored actions are re-used for several updates
# (pattern: hunkim/ReinforcementZeroToAll#16 "log 0 -> nan problem").
import torch
import torch.nn as nn

torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self, n_obs=8, n_actions=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_obs, 32), nn.Tanh(), nn.Linear(32, n_actions))

    def forward(self, s):
        return torch.softmax(self.net(s), dim=1)


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

states = torch.randn(200, 8)
with torch.no_grad():
    actions = torch.multinomial(policy(states), 1).squeeze(1)
rewards = (actions == (states[:, 0] > 0).long()).float() - 0.5

for epoch in range(5):
    for i in range(0, 200, 50):
        s, a, r = states[i:i + 50], actions[i:i + 50], rewards[i:i + 50]
        probs = policy(s)
        log_prob = torch.log(probs.gather(1, a.unsqueeze(1)).squeeze(1).clamp(min=1e-10))
        loss = -(log_prob * (r - r.mean())).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} pg loss {loss.item():.4f}")
