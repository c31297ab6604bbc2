# Soft actor-critic update with a tanh-squashed Gaussian actor
# (pattern: rlworkgroup/garage#2129, pranz24/pytorch-soft-actor-critic).
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

torch.manual_seed(0)


class Actor(nn.Module):
    def __init__(self, obs_dim=6, act_dim=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU())
        self.mu = nn.Linear(64, act_dim)
        self.log_std = nn.Linear(64, act_dim)

    def forward(self, obs):
        h = self.body(obs)
        mean = self.mu(h)
        log_std = torch.clamp(self.log_std(h), -20, 2)
        normal = Normal(mean, log_std.exp())
        x_t = normal.rsample()
        action = torch.tanh(x_t)
        log_prob = normal.log_prob(x_t)
        log_prob -= 2 * (math.log(2.0) - x_t - F.softplus(-2 * x_t))
        return action, log_prob.sum(1)


actor = Actor()
critic = nn.Sequential(nn.Linear(6 + 2, 64), nn.ReLU(), nn.Linear(64, 1))
a_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
c_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
alpha, gamma = 0.2, 0.99

obs = torch.randn(256, 6)
act = torch.rand(256, 2) * 2 - 1
rew = -(act ** 2).sum(1, keepdim=True)
next_obs = obs + 0.1 * torch.randn(256, 6)

for step in range(10):
    idx = torch.randint(0, 256, (64,))
    with torch.no_grad():
        next_a, next_logp = actor(next_obs[idx])
        target = rew[idx] + gamma * (critic(torch.cat([next_obs[idx], next_a], 1)) - alpha * next_logp.unsqueeze(1))
    q_loss = F.mse_loss(critic(torch.cat([obs[idx], act[idx]], 1)), target)
    c_opt.zero_grad()
    q_loss.backward()
    c_opt.step()

    new_a, logp = actor(obs[idx])
    pi_loss = (alpha * logp - critic(torch.cat([obs[idx], new_a], 1)).squeeze(1)).mean()
    a_opt.zero_grad()
    pi_loss.backward()
    a_opt.step()
    print(f"step {step} q_loss {q_loss.item():.4f} pi_loss {pi_loss.item():.4f}")
