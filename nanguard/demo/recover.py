"""Demo section "recover": the training step that survives a NaN gradient, and the warning
that comes before an explosion.

Replays the seeds: a user zeroing NaN gradients by hand with a `was_nan` flag before
`apply_gradients`, and a user clipping logits, which hid an exploding gradient instead of
finding it.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from typing import List, Tuple

import torch

from nanguard.demo import Show
from nanguard.torch.guard import GradGuard, GradientGrowthWarning, GradNormMonitor

STEPS = 30
BAD_BATCH = 12


class Distances(torch.nn.Module):
    """A regression that uses the length of a hidden vector, sqrt(|h|²): the distance-matrix
    seed. A zero input row makes h = 0, where sqrt's gradient is inf and 0·inf = NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(4, 8, bias=False)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        return self.head(torch.tanh(h)) + 0.1 * torch.sqrt((h * h).sum(-1, keepdim=True))


def _batches() -> List[Tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 1, generator=g)
    out = []
    for step in range(STEPS):
        x = torch.randn(16, 4, generator=g)
        if step == BAD_BATCH:
            x[5] = 0.0  # one all-zero sample (padding that slipped into the data)
        out.append((x, x @ w))
    return out


def _train(guarded: bool):
    torch.manual_seed(0)
    model = Distances()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = GradGuard(opt, model=model) if guarded else None
    losses = []
    for x, y in _batches():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        guard.step() if guard is not None else opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        final = torch.nn.functional.mse_loss(model(_batches()[0][0]), _batches()[0][1]).item()
    return model, guard, losses, final


def _explode():
    """Deep linear regression; at step 60 the head's learning rate is raised too far."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(8, 32), body=torch.nn.Linear(32, 32), head=torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD([
        {"params": list(model.embed.parameters()) + list(model.body.parameters()), "lr": 0.01},
        {"params": model.head.parameters(), "lr": 0.01}])
    guard = GradGuard(opt, model=model, monitor=GradNormMonitor(window=40, factor=10),
                      max_consecutive=None)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 1, generator=g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GradientGrowthWarning)
        for step in range(110):
            if step == 60:
                opt.param_groups[1]["lr"] = 1.0
            x = torch.randn(64, 8, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), x @ w).backward()
            guard.step()
    found = [w for w in caught if issubclass(w.category, GradientGrowthWarning)]
    return guard, found


def run(show: Show) -> None:
    show.title("Recover: guard the training step")

    show.story("One batch yields a NaN gradient; the naive loop never recovers")
    show.code(f"""
for x, y in batches:                     # batch {BAD_BATCH + 1} holds one all-zero sample
    loss = mse(model(x), y)              # finite: sqrt(0) = 0 ...
    loss.backward()                      # ... but d sqrt/du = inf at 0, and 0·inf = NaN
    optimizer.step()
""")
    model, _, losses, final = _train(guarded=False)
    poisoned = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    show.bad(f"loss at step {BAD_BATCH + 1} (the bad batch)", f"{losses[BAD_BATCH]:.4f} (finite!)")
    show.bad("parameters after the Adam step", f"NaN in {', '.join(poisoned)}")
    show.bad(f"loss for the rest of the run (steps {BAD_BATCH + 2}..{STEPS})",
             "nan" if all(math.isnan(v) for v in losses[BAD_BATCH + 1:]) else losses[-1])

    show.story("The seed's hand-written fix, and the nanguard way")
    show.code("""
# what the seed did, in TensorFlow: zero the NaNs by hand, track a was_nan flag
grads = [tf.where(tf.is_nan(g), tf.zeros(g.shape), g) for g in grads]
was_nan = tf.reduce_any([tf.reduce_any(tf.is_nan(g)) for g in grads])

# nanguard: one line; skip (default), zero or raise; and it says where
guard = nanguard.GradGuard(optimizer, model=model)
loss.backward()
guard.step()                             # returns False for the bad batch
""")
    model, guard, losses, final = _train(guarded=True)
    assert guard is not None
    show.good("the bad batch", guard.records.events[0].describe())
    show.good("parameters", "all finite" if all(torch.isfinite(p).all() for p in model.parameters())
              else "NaN")
    show.good(f"loss after {STEPS} steps", f"{final:.4f}")
    show.note("guard.summary():")
    for line in guard.summary().splitlines():
        show.note("  " + line)

    show.story("clip_grad_norm_ does not protect you: one NaN turns every gradient NaN")
    torch.manual_seed(0)
    plain = Distances()
    x, y = _batches()[BAD_BATCH]
    torch.nn.functional.mse_loss(plain(x), y).backward()
    total = torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
    nan_params = sum(bool(torch.isnan(p.grad).all()) for p in plain.parameters())
    show.bad("torch.nn.utils.clip_grad_norm_(params, 1.0)",
             f"total norm {total.item()}; {nan_params} of 3 gradients now entirely NaN")
    torch.manual_seed(0)
    model = Distances()
    guard = GradGuard(torch.optim.Adam(model.parameters()), model=model, policy="zero")
    torch.nn.functional.mse_loss(model(x), y).backward()
    total = guard.clip_grad_norm_(1.0)
    show.good("guard.clip_grad_norm_(1.0) with policy='zero'",
              f"non-finite elements zeroed, the rest clipped by their own norm {total.item():.3f}")

    show.story("Clipping logits hid an exploding gradient: get a warning instead, before inf")
    show.code("""
guard = nanguard.GradGuard(optimizer, model=model, monitor=nanguard.GradNormMonitor(window=40))
# at step 61 a schedule raises the head's learning rate too far
""")
    guard, found = _explode()
    first_bad = guard.records.bad_steps[0] if guard.records.bad_steps else None
    if guard.alerts:
        alert = guard.alerts[0]
        show.good(f"GradientGrowthWarning at step {alert.step}",
                  f"growth started in `{alert.origin}` at step {alert.origin_step}")
        for line in str(found[0].message).splitlines()[1:3]:
            show.note(line.strip())
    show.bad("first non-finite gradient", f"step {first_bad} (skipped by the guard)")
    show.note("guard.plot('gradnorms.png') draws the per-module history (pip install nanguard[plot]).")
