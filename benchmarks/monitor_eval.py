"""How well the gradient-growth monitor warns: lead, origin and false alarms, on real runs.

Not a timing benchmark: it trains small models on CPU and scores the default
``GradNormMonitor()`` (window 50, factor 10) on four kinds of run.

- ``rnn``: a ReLU RNN (hidden 32, 40 steps through time) learning a running sum with SGD
  whose learning rate ramps geometrically from 1e-6 to 1e-3 over 400 steps (a warm-up that
  overshoots); past some step the recurrent matrix's spectral radius exceeds 1 and the
  gradient explodes through time. The origin is ``rnn``. Recurrent matrix initialised at
  0.9 I and 0.5 I, 5 seeds each.
- ``head_lr``: a 3-layer MLP regression whose head's learning rate is set to 1.0 at step 100;
  the head diverges and the gradients overflow about 10 steps later. The origin is ``head``.
- ``healthy``: the same MLP at lr 0.01 (500 steps), the RNN at lr 3e-5 (300 steps), a 2-layer
  transformer encoder with AdamW 3e-3 (300 steps); none goes non-finite.
- ``too_high``: the transformer with AdamW at 3e-2 and 1e-1 (300 steps) and the MLP with SGD
  at 0.2: unstable, loss spikes, but (where the table says so) never a non-finite gradient.

For a run that goes non-finite, *lead* is the number of steps from the first warning to the
first non-finite gradient (0: no warning before it). A warning in a run that never goes
non-finite is counted as a false alarm. Runs that go non-finite before the window is full
(step 50) cannot be warned and are listed but not scored.

    .venv/bin/python benchmarks/monitor_eval.py [--climb 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import nanguard  # noqa: E402


@dataclass
class Outcome:
    scenario: str
    config: str
    first_bad: Optional[int]
    alerts: list
    truth: Optional[str]

    @property
    def lead(self) -> Optional[int]:
        if self.first_bad is None:
            return None
        before = [a for a in self.alerts if a.step < self.first_bad]
        return self.first_bad - before[0].step if before else 0

    @property
    def last_lead(self) -> Optional[int]:
        """Steps from the last warning before the first non-finite gradient to it."""
        if self.first_bad is None:
            return None
        before = [a for a in self.alerts if a.step < self.first_bad]
        return self.first_bad - before[-1].step if before else 0


class RNNNet(torch.nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.rnn = torch.nn.RNN(4, hidden, nonlinearity="relu", batch_first=True)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


CLIMB: Optional[int] = None  # --climb K: the monitor's opt-in climb test


def guarded(model: torch.nn.Module, opt: torch.optim.Optimizer) -> nanguard.GradGuard:
    return nanguard.GradGuard(opt, model=model, max_consecutive=None,
                              monitor=nanguard.GradNormMonitor(warn=False, climb=CLIMB))


def train(guard: nanguard.GradGuard, steps: int, loss_at: Callable[[int], torch.Tensor],
          before: Callable[[int], None] = lambda t: None) -> Optional[int]:
    for t in range(steps):
        before(t)
        guard.optimizer.zero_grad()
        loss = loss_at(t)
        if not torch.isfinite(loss):
            return t + 1
        loss.backward()
        if not guard.step():
            return guard.records.bad_steps[0]
    return None


def rnn_run(seed: int, lr: float, steps: int, ramp_to: Optional[float] = None,
            rho: float = 0.9) -> tuple:
    torch.manual_seed(seed)
    net = RNNNet()
    with torch.no_grad():
        net.rnn.weight_hh_l0.copy_(rho * torch.eye(32) + 0.01 * torch.randn(32, 32))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    guard = guarded(net, opt)
    g = torch.Generator().manual_seed(seed)

    def before(t: int) -> None:
        if ramp_to is not None:
            opt.param_groups[0]["lr"] = lr * (ramp_to / lr) ** (t / steps)

    def loss_at(t: int) -> torch.Tensor:
        x = torch.rand(32, 40, 4, generator=g)
        return torch.nn.functional.mse_loss(net(x), x[:, :, 0].sum(1, keepdim=True))

    return guard, train(guard, steps, loss_at, before)


def mlp_run(seed: int, steps: int, head_lr_at_100: Optional[float], lr: float = 0.01) -> tuple:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(8, 32), body=torch.nn.Linear(32, 32), head=torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD([
        {"params": list(model.embed.parameters()) + list(model.body.parameters()), "lr": lr},
        {"params": model.head.parameters(), "lr": lr}])
    guard = guarded(model, opt)
    g = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(8, 1, generator=g)

    def before(t: int) -> None:
        if head_lr_at_100 is not None and t == 100:
            opt.param_groups[1]["lr"] = head_lr_at_100

    def loss_at(t: int) -> torch.Tensor:
        x = torch.randn(64, 8, generator=g)
        return torch.nn.functional.mse_loss(model(x), x @ w + 0.1 * torch.randn(64, 1, generator=g))

    return guard, train(guard, steps, loss_at, before)


def transformer_run(seed: int, lr: float, steps: int) -> tuple:
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.1, batch_first=True)
    net = torch.nn.Sequential(OrderedDict(
        encoder=torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
        head=torch.nn.Linear(16, 1)))
    guard = guarded(net, torch.optim.AdamW(net.parameters(), lr=lr))
    g = torch.Generator().manual_seed(seed)

    def loss_at(t: int) -> torch.Tensor:
        x = torch.randn(8, 6, 16, generator=g)
        target = x[..., :1].sum(1, keepdim=True).expand(-1, 6, -1)
        return torch.nn.functional.mse_loss(net(x), target)

    return guard, train(guard, steps, loss_at)


def runs() -> List[Outcome]:
    out: List[Outcome] = []

    def add(scenario: str, config: str, result: tuple, truth: Optional[str]) -> None:
        guard, first_bad = result
        out.append(Outcome(scenario, config, first_bad, list(guard.alerts), truth))
        o = out[-1]
        alerts = ", ".join(f"step {a.step} {a.reason} origin {a.origin}" for a in o.alerts[:3])
        print(f"  {scenario:9} {config:22} non-finite at {first_bad!s:5} alerts: {alerts or '-'}",
              flush=True)

    for rho in (0.9, 0.5):
        for seed in range(5):
            add("rnn", f"W_hh {rho} I seed {seed}", rnn_run(seed, 1e-6, 400, 1e-3, rho), "rnn")
    for seed in range(4):
        add("head_lr", f"seed {seed}", mlp_run(seed, 200, 1.0), "head")
    for seed in range(3):
        add("healthy", f"mlp seed {seed}", mlp_run(seed, 500, None), None)
        add("healthy", f"rnn lr 1e-5 seed {seed}", rnn_run(seed, 1e-5, 300), None)
        add("cliffs", f"rnn lr 3e-5 seed {seed}", rnn_run(seed, 3e-5, 300), None)
    for seed in range(2):
        add("healthy", f"transformer seed {seed}", transformer_run(seed, 3e-3, 300), None)
    for seed in range(2):
        add("too_high", f"transformer 3e-2 s{seed}", transformer_run(seed, 3e-2, 300), None)
        add("too_high", f"transformer 1e-1 s{seed}", transformer_run(seed, 1e-1, 300), None)
        add("too_high", f"mlp sgd 0.2 s{seed}", mlp_run(seed, 300, None, lr=0.2), None)
    return out


def main() -> None:
    global CLIMB
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--climb", type=int, default=None,
                        help="score GradNormMonitor(climb=K) instead of the default")
    CLIMB = parser.parse_args().climb
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", nanguard.GradientGrowthWarning)
    print("runs:")
    outcomes = runs()
    print("\nscenario   scored runs  warned  median lead (first, last warning)  origin right  "
          "false alarms (finite runs)")
    for scenario in ("rnn", "head_lr", "healthy", "too_high", "cliffs"):
        group = [o for o in outcomes if o.scenario == scenario]
        exploding = [o for o in group if o.first_bad is not None and o.first_bad > 50]
        finite = [o for o in group if o.first_bad is None]
        warned = [o for o in exploding if o.lead]
        leads = sorted(o.lead for o in exploding)
        last = sorted(o.last_lead for o in exploding)
        right = [o for o in warned
                 if [a for a in o.alerts if a.step < o.first_bad][-1].origin == o.truth]
        lead = f"{leads[len(leads) // 2]}, {last[len(last) // 2]}" if leads else "-"
        alarms = sum(len(o.alerts) for o in finite)
        # a ramp run cut at 400 steps while its LR still rises is not a healthy run
        false = f"{alarms} in {len(finite)} runs" if scenario != "rnn" else f"({alarms} in {len(finite)} cut runs)"
        print(f"{scenario:10} {len(exploding):11}  {len(warned):6}  {lead:>33}  "
              f"{len(right):5} of {len(warned):<4}  {false}")


if __name__ == "__main__":
    main()
