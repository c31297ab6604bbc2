"""Policy "rollback" on the shared benchmark transformer: its cost, and what it recovers.

1. Overhead (same run, interleaved, 1 thread): GradGuard(policy="rollback") at the default
   ``snapshot_every`` (K), with and without the spike test, beside skip-only (the default
   policy), all through ``guard.backward(loss); guard.step()``. One timed call is K steps,
   so every sample holds exactly one snapshot; the ratio is the median over rounds of
   case/skip. Goal (issue 30): <= 1.03x. The snapshot and the restore are also timed alone
   against one step.
2. Planted spikes: a 600-step regression run (a fixed random teacher, fresh batches, Adam
   with a cosine schedule set by the loop, as nanoGPT sets it) with a bad batch of huge
   values (inputs and targets x1000) at step 200 and a learning rate x100 for step 350.
   Final loss on 8 held-out batches for a clean run, skip-only, and rollback with
   ``spike=dict(loss=5.0, grad_norm=10.0, window=50)``, without and with ``lr_backoff=0.5``.
   Goal (issue 30): rollback within 1% of the clean run, skip-only at least 5% worse.

    .venv/bin/python benchmarks/guard_rollback.py [--rounds 15] [--steps 600] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from benchmarks.common import compare, print_table, single_thread, transformer  # noqa: E402
from nanguard.core.guard_policy import DEFAULT_SNAPSHOT_EVERY  # noqa: E402
from nanguard.torch.guard import GradGuard  # noqa: E402
from nanguard.torch.guard.rollback import Snapshot, TrainingState  # noqa: E402

GOAL = 1.03
SPIKE = dict(loss=5.0, grad_norm=10.0, window=50)


def guarded_steps(k: int, **guard_args: Any) -> Tuple[GradGuard, Callable[[], None]]:
    """The benchmark transformer on its fixed batch; the returned call runs `k` guarded steps."""
    net = transformer()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    inputs, target = torch.randn(16, 32, 128), torch.randn(16, 32, 1)
    guard = GradGuard(optimizer, model=net, **guard_args)

    def steps() -> None:
        for _ in range(k):
            optimizer.zero_grad(set_to_none=True)
            guard.backward(torch.nn.functional.mse_loss(net(inputs), target))
            guard.step()

    return guard, steps


def overhead(rounds: int) -> Dict[str, Dict[str, float]]:
    k = DEFAULT_SNAPSHOT_EVERY
    _, skip = guarded_steps(k)
    rollback_guard, rollback = guarded_steps(k, policy="rollback")
    spike_guard, spiked = guarded_steps(k, policy="rollback", spike=SPIKE)
    results = compare({"skip": skip, "rollback": rollback, "rollback + spike": spiked},
                      baseline="skip", rounds=rounds, inner=1, warmup=1)
    for guard in (rollback_guard, spike_guard):
        assert guard.records.rolled_back == 0, "the healthy benchmark run must not roll back"
    for r in results.values():
        r["seconds"] /= k  # per step
    return results


def snapshot_alone(rounds: int) -> Dict[str, Dict[str, float]]:
    """One step, one snapshot, one restore of the same model, interleaved."""
    net = transformer()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    inputs, target = torch.randn(16, 32, 128), torch.randn(16, 32, 1)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(net(inputs), target).backward()
        optimizer.step()

    step()  # Adam's state exists
    state = TrainingState(list(net.parameters()), optimizer, net, (), None)
    snapshot = Snapshot()
    snapshot.take(state)
    return compare({"step": step, "snapshot": lambda: snapshot.take(state),
                    "restore": lambda: snapshot.restore(state)},
                   baseline="step", rounds=rounds, inner=3)


# -- planted spikes ----------------------------------------------------------------------
LR = 1e-3


def teacher_batch(step: int, teacher: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(16, 32, 128, generator=g)
    return x, torch.tanh(x @ teacher) + 0.1 * torch.randn(16, 32, 1, generator=g)


def planted_run(steps: int, plant: bool, **guard_args: Any) -> Tuple[float, GradGuard, List[float]]:
    """Final held-out loss of one run; `plant`: the bad batch and the learning-rate spike."""
    teacher = torch.randn(128, 1, generator=torch.Generator().manual_seed(1)) / 128 ** 0.5
    bad_batch, lr_spike = steps // 3, steps * 7 // 12
    net = transformer()
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    guard = GradGuard(optimizer, model=net, **guard_args)
    losses = []
    for step in range(steps):
        x, y = teacher_batch(step, teacher)
        if plant and step == bad_batch:
            x, y = x * 1e3, y * 1e3
        lr = LR * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for group in optimizer.param_groups:
            group["lr"] = lr * (100.0 if plant and step == lr_spike else 1.0)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), y)
        losses.append(float(loss.detach()))
        guard.backward(loss)
        guard.step()
    with torch.no_grad():
        held = [teacher_batch(10 ** 6 + i, teacher) for i in range(8)]
        final = sum(float(torch.nn.functional.mse_loss(net(x), y)) for x, y in held) / len(held)
    return final, guard, losses


def planted(steps: int, snapshot_every: Optional[int]) -> Dict[str, Dict[str, Any]]:
    runs = {
        "clean": dict(plant=False),
        "skip-only": dict(plant=True),
        "rollback": dict(plant=True, policy="rollback", snapshot_every=snapshot_every,
                         spike=SPIKE),
        "rollback, lr_backoff=0.5": dict(plant=True, policy="rollback",
                                         snapshot_every=snapshot_every, spike=SPIKE,
                                         lr_backoff=0.5),
    }
    out = {}
    for name, kwargs in runs.items():
        final, guard, losses = planted_run(steps, **kwargs)  # type: ignore[arg-type]
        out[name] = {"final_loss": final, "max_loss": max(losses),
                     "rollbacks": [(e.step, e.kind, e.steps_undone) for e in guard.records.events
                                   if e.action == "rolled back"],
                     "lr_scale": guard.lr_scale}
    for r in out.values():
        r["vs_clean"] = r["final_loss"] / out["clean"]["final_loss"]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=600, help="steps of the planted runs")
    parser.add_argument("--snapshot-every", type=int, default=None,
                        help=f"K of the planted rollback runs (default {DEFAULT_SNAPSHOT_EVERY})")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    single_thread()

    loops = overhead(args.rounds)
    print(f"training step of the benchmark transformer (4-layer encoder, batch 16x32x128), "
          f"1 thread; rollback at the default snapshot_every={DEFAULT_SNAPSHOT_EVERY}")
    rows = []
    for name, r in loops.items():
        verdict = "" if name == "skip" else ("ok" if r["ratio"] <= GOAL else "OVER")
        rows.append([name, f"{r['seconds'] * 1e3:.2f}", f"{r['ratio']:.3f}",
                     "" if name == "skip" else f"<= {GOAL:.2f}", verdict])
    print_table(rows, ["policy", "ms/step", "vs skip", "goal", ""])

    alone = snapshot_alone(args.rounds)
    print()
    print("the snapshot and the restore alone (parameters + Adam state + RNG, 0.53 M parameters)")
    print_table([[k, f"{v['seconds'] * 1e3:.2f}", f"{v['ratio']:.3f}"] for k, v in alone.items()],
                ["part", "ms", "of a step"])
    cost = alone["snapshot"]["ratio"]
    print(f"one snapshot every K steps costs {cost:.3f}/K of a step: K >= {math.ceil(cost / 0.03)} "
          f"keeps it within 3%")

    spikes = planted(args.steps, args.snapshot_every)
    print()
    print(f"planted spikes, {args.steps} steps: a batch x1000 at step {args.steps // 3}, "
          f"the learning rate x100 at step {args.steps * 7 // 12}")
    print_table([[name, f"{r['final_loss']:.5f}", f"{r['vs_clean']:.3f}", f"{r['max_loss']:.3g}",
                  "; ".join(f"step {s}: {kind}, {n} undone" for s, kind, n in r["rollbacks"]),
                  f"{r['lr_scale']:g}"]
                 for name, r in spikes.items()],
                ["run", "final loss", "vs clean", "max loss", "rollbacks", "lr scale"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loops": loops, "snapshot_alone": alone, "planted": spikes}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
