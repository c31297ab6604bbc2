"""GradGuard overhead on the shared benchmark transformer (same run, interleaved, 1 thread).

Four training loops over identical models and data, timed in interleaved rounds:

- plain:     optimizer.zero_grad(); loss.backward(); optimizer.step()
- guarded:   ... loss.backward(); guard.step()                    (monitoring off)
- monitored: ... loss.backward(); guard.step()  with GradNormMonitor (per-module norms)
- headroom:  monitored, with GradNormMonitor(headroom=True) (float32: the hooks find nothing
             to watch)

and, in bfloat16 autocast (where the headroom watch has work: one aminmax per module output
and per gradient arriving at it), "monitored" and "headroom" again, timed against each other.

Goals (issue 4): guarded <= 1.03x plain, monitored <= 1.08x plain. The step is also timed
alone (optimizer.step() vs guard.step() on the same gradients, no forward/backward), which
shows the guard's own milliseconds with less of the machine's noise.

    .venv/bin/python benchmarks/guard.py [--rounds 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from benchmarks.common import compare, print_table, single_thread, transformer_step_factory  # noqa: E402
from nanguard.torch.guard import GradGuard, GradNormMonitor  # noqa: E402

GOALS = {"guarded": 1.03, "monitored": 1.08}


def guarded_factory(monitor: bool, headroom: bool = False, autocast=None):
    """The benchmark model and optimizer, with guard.step() in place of optimizer.step()."""
    guards = []

    def make_update(net, optimizer):
        guards.append(GradGuard(optimizer, model=net,
                                monitor=GradNormMonitor(warn=False, headroom=headroom) if monitor else False))
        return guards[0].step

    net, _, step = transformer_step_factory(make_update=make_update, autocast=autocast)
    return net, guards[0], step


def headroom_cost(rounds: int, inner: int) -> dict:
    """The monitor with and without the headroom watch, in bfloat16 autocast, interleaved."""
    _, plain_guard, monitored = guarded_factory(monitor=True, autocast=torch.bfloat16)
    _, headroom_guard, headroom = guarded_factory(monitor=True, headroom=True, autocast=torch.bfloat16)
    results = compare({"monitored (bf16 autocast)": monitored, "headroom (bf16 autocast)": headroom},
                      baseline="monitored (bf16 autocast)", rounds=rounds, inner=inner)
    watched = len(headroom_guard.monitor.headroom._series)
    assert watched, "the headroom watch saw no bfloat16 tensor"
    assert not headroom_guard.monitor.headroom_alerts, "the healthy run must not warn about headroom"
    return results


def step_cost(rounds: int) -> dict:
    """The optimizer step alone vs guard.step() alone, on real transformer gradients (no
    forward/backward, so the guard's share is not diluted by them), interleaved."""
    net, optimizer, step = transformer_step_factory()
    step()  # gradients and Adam state exist
    plain_guard = GradGuard(optimizer, model=net)
    monitor_guard = GradGuard(optimizer, model=net, monitor=GradNormMonitor(warn=False))
    return compare({"optimizer.step()": optimizer.step, "guard.step()": plain_guard.step,
                    "guard.step() + monitor": monitor_guard.step},
                   baseline="optimizer.step()", rounds=rounds, inner=10)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    single_thread()

    _, _, plain = transformer_step_factory()
    _, _, guarded = guarded_factory(monitor=False)
    _, monitored_guard, monitored = guarded_factory(monitor=True)
    _, _, headroom = guarded_factory(monitor=True, headroom=True)
    results = compare({"plain": plain, "guarded": guarded, "monitored": monitored, "headroom": headroom},
                      baseline="plain", rounds=args.rounds, inner=args.inner)
    rows = []
    for name, r in results.items():
        goal = GOALS.get(name)
        verdict = "" if goal is None else ("ok" if r["ratio"] <= goal else "OVER")
        rows.append([name, f"{r['seconds'] * 1e3:.2f}", f"{r['ratio']:.3f}",
                     "" if goal is None else f"<= {goal:.2f}", verdict])
    print("training step of the benchmark transformer (4-layer encoder, batch 16x32x128), 1 thread")
    print_table(rows, ["loop", "ms/step", "ratio", "goal", ""])
    assert not monitored_guard.alerts, "the healthy benchmark run must not raise an early warning"

    low = headroom_cost(args.rounds, args.inner)
    print()
    print("the headroom watch where it has work: bfloat16 autocast, against the monitor alone")
    print_table([[k, f"{v['seconds'] * 1e3:.2f}", f"{v['ratio']:.3f}"] for k, v in low.items()],
                ["loop", "ms/step", "ratio"])
    results.update(low)

    costs = step_cost(args.rounds)
    print()
    print("the step alone on the same gradients (Adam, no forward/backward)")
    print_table([[k, f"{v['seconds'] * 1e3:.3f}", f"{v['ratio']:.3f}",
                  f"{(v['seconds'] - costs['optimizer.step()']['seconds']) * 1e3:+.3f}"]
                 for k, v in costs.items()], ["part", "ms", "ratio", "guard ms"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loops": results, "step_alone": costs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
