# PPO clipped-surrogate update on a stored rollout (several epochs over the
# same batch, stale old log-probs) (pattern: PrimeIntellect-ai/prime-rl#2084).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

policy = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 5))
optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
clip_eps = 0.2

obs = torch.randn(256, 8)
with torch.no_grad():
    old_logits = policy(obs)
    actions = torch.distributions.Categorical(logits=old_logits).sample()
    old_logp = F.log_softmax(old_logits, dim=1).gather(1, actions[:, None]).squeeze(1)
advantages = torch.randn(256)
advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

for epoch in range(4):
    for i in range(0, 256, 64):
        mb = slice(i, i + 64)
        new_logp = F.log_softmax(policy(obs[mb]), dim=1).gather(1, actions[mb, None]).squeeze(1)
        ratio = torch.exp(torch.clamp(new_logp - old_logp[mb], -20.0, 20.0))
        surr1 = ratio * advantages[mb]
        surr2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages[mb]
        loss = -torch.min(surr1, surr2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} ppo loss {loss.item():.4f}")
