# Contrast-Consistent Search (CCS) probe on frozen hidden states, with the
# "prompt variance" consistency term computed across prompt variants
# (pattern: EleutherAI/elk#120 - ccs_prompt_var gives NaN with num_variants=1).
import warnings
import torch
import torch.nn as nn

warnings.simplefilter("ignore")       # torch warns about degrees of freedom <= 0
torch.manual_seed(0)

n, num_variants, d = 256, 1, 32
truth = torch.randint(0, 2, (n, 1)).float()
direction = torch.randn(d)
hidden_pos = torch.randn(n, num_variants, d) + truth[..., None] * direction
hidden_neg = torch.randn(n, num_variants, d) + (1 - truth[..., None]) * direction

probe = nn.Linear(d, 1)
optimizer = torch.optim.Adam(probe.parameters(), lr=1e-2)


def ccs_prompt_var_loss(logit0, logit1):
    p0, p1 = logit0.sigmoid(), logit1.sigmoid()              # (n, variants)
    consistency = (p0 - (1 - p1)).var(dim=-1).mean()  # ORIGIN
    confidence = torch.min(p0, p1).pow(2).mean()
    return consistency + confidence


for step in range(10):
    logit0 = probe(hidden_pos).squeeze(-1)
    logit1 = probe(hidden_neg).squeeze(-1)
    loss = ccs_prompt_var_loss(logit0, logit1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} ccs loss {loss.item():.4f}")
