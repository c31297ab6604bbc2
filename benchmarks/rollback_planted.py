"""Planted spikes on the benchmark transformer, 1 process: what policy "rollback" recovers.

A run is a 600-step regression (a fixed random teacher, fresh batches, Adam with a cosine
schedule set by the loop, as nanoGPT sets it), scored by its final loss on 8 held-out
batches. Three plants, alone or together:

- ``batch``: a bad batch (inputs and targets x1000) at step steps/3: finite, so skip-only
  applies it and Adam's second moments jump 10^6-fold, which stalls the run;
- ``lr``: the learning rate x100 for the update of step 7*steps/12: the damage shows in the
  next step's loss;
- ``fp16``: a float16 overflow left in the weights: after the update of step 5*steps/6 one
  element of the head's weight is +inf, as a GradScaler-free float16 update that leaves the
  range (65504) writes it. Every later step is non-finite: skip-only skips them until
  ``max_consecutive`` stops the run.

Rollback runs use ``spike=SPIKE``; the seed sets the model's weights, the teacher, the
batches and where the plants fall (`plant_steps`). `sweep` runs every (seed, case, K) in a
process pool, one thread a run, and appends each row to a JSON-lines log as it ends.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from benchmarks.common import transformer  # noqa: E402
from nanguard import NonFiniteError  # noqa: E402
from nanguard.torch.guard import GradGuard  # noqa: E402

LR = 1e-3
SPIKE = dict(loss=5.0, grad_norm=10.0, window=50)
PLANTS = ("batch", "lr", "fp16")
CASES = {"all three": PLANTS, "bad batch": ("batch",), "lr spike": ("lr",),
         "fp16 overflow": ("fp16",)}


def plant_steps(steps: int, seed: int = 0) -> Dict[str, int]:
    """Where the plants go: seed s moves them by 7s, 11s and 13s steps, so that over seeds
    they fall at different points between two snapshots (a rollback undoes the applied steps
    since the last one: at a fixed step a multiple of K, always K)."""
    return {"batch": steps // 3 + 7 * seed, "lr": steps * 7 // 12 + 11 * seed,
            "fp16": steps * 5 // 6 + 13 * seed}


def teacher_batch(step: int, teacher: torch.Tensor, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step + 10 ** 7 * seed)
    x = torch.randn(16, 32, 128, generator=g)
    return x, torch.tanh(x @ teacher) + 0.1 * torch.randn(16, 32, 1, generator=g)


def planted_run(steps: int, plants: Iterable[str] = (), seed: int = 0,
                **guard_args: Any) -> Dict[str, Any]:
    """One run; returns its final held-out loss (inf when not finite), the largest training
    loss, the rollbacks (step, kind, steps undone), the LR scale and where it stopped."""
    plants = set(plants)
    at = plant_steps(steps, seed)
    teacher = torch.randn(128, 1, generator=torch.Generator().manual_seed(1 + seed)) / 128 ** 0.5
    net = transformer(seed=seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    guard = GradGuard(optimizer, model=net, **guard_args)
    head = net[1].weight
    losses: List[float] = []
    stopped = None
    for step in range(steps):
        x, y = teacher_batch(step, teacher, seed)
        if "batch" in plants and step == at["batch"]:
            x, y = x * 1e3, y * 1e3
        lr = LR * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for group in optimizer.param_groups:
            group["lr"] = lr * (100.0 if "lr" in plants and step == at["lr"] else 1.0)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), y)
        losses.append(float(loss.detach()))
        try:
            guard.backward(loss)
            applied = guard.step()
        except NonFiniteError:
            stopped = step
            break
        if "fp16" in plants and step == at["fp16"] and applied:
            with torch.no_grad():
                head[0, 0] = float("inf")
    with torch.no_grad():
        held = [teacher_batch(10 ** 6 + i, teacher, seed) for i in range(8)]
        final = sum(float(torch.nn.functional.mse_loss(net(x), y)) for x, y in held) / len(held)
    return {"final_loss": final if math.isfinite(final) else math.inf,
            "max_loss": max(losses), "stopped": stopped,
            "rollbacks": [(e.step, e.kind, e.steps_undone) for e in guard.records.events
                          if e.action == "rolled back"],
            "lr_scale": guard.lr_scale, "summary": guard.summary()}


def _task(args: Tuple[int, int, str, Tuple[str, ...], Dict[str, Any]]) -> Dict[str, Any]:
    steps, seed, name, plants, guard_args = args
    torch.set_num_threads(1)
    out = planted_run(steps, plants, seed, **guard_args)
    out.update(seed=seed, run=name, plants=list(plants),
               snapshot_every=guard_args.get("snapshot_every"),
               lr_backoff=guard_args.get("lr_backoff"))
    return out


def sweep(steps: int, seeds: Sequence[int], ks: Sequence[int], cases: Dict[str, Sequence[str]],
          backoff_k: Optional[int] = None, jobs: int = 2, log: Optional[str] = None,
          case_ks: Optional[Dict[str, Sequence[int]]] = None,
          clean: bool = True) -> List[Dict[str, Any]]:
    """Every seed: a clean run; every case: skip-only and rollback at every K (`case_ks`
    overrides the Ks of some cases; with `backoff_k`, also rollback with lr_backoff=0.5 at
    that K). Each row gets `vs_clean`; `log`: rows appended there as they end; `clean`
    False: no clean runs (another sweep's log has them)."""
    tasks = [(steps, seed, "clean", (), {}) for seed in seeds if clean]  # case by case
    for case, plants in cases.items():
        runs: List[Tuple[str, Dict[str, Any]]] = [(f"{case}: skip-only", {})]
        runs += [(f"{case}: rollback", dict(policy="rollback", snapshot_every=k, spike=SPIKE))
                 for k in (case_ks or {}).get(case, ks)]
        if backoff_k is not None:
            runs.append((f"{case}: rollback, lr_backoff=0.5",
                         dict(policy="rollback", snapshot_every=backoff_k, spike=SPIKE,
                              lr_backoff=0.5)))
        tasks += [(steps, seed, name, tuple(plants), args) for name, args in runs
                  for seed in seeds]
    rows = []
    pool = multiprocessing.get_context("spawn").Pool(jobs) if jobs > 1 else None
    try:
        for row in (pool.imap_unordered(_task, tasks) if pool else map(_task, tasks)):
            rows.append(row)
            if log is not None:
                with open(log, "a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        if pool is not None:
            pool.close()
    return with_ratios(rows)


def with_ratios(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    clean = {r["seed"]: r["final_loss"] for r in rows if r["run"] == "clean"}
    for r in rows:
        r["vs_clean"] = r["final_loss"] / clean[r["seed"]] if r["seed"] in clean else math.nan
    return rows


def table(rows: List[Dict[str, Any]]) -> Tuple[List[List[str]], List[str]]:
    """One line per (run, K): the final loss per seed and the worst ratio to clean."""
    seeds = sorted({r["seed"] for r in rows})
    groups: Dict[Tuple[str, Any], Dict[int, Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["run"], r["snapshot_every"]), {})[r["seed"]] = r
    out = []
    for (run, k), by_seed in groups.items():
        ratios = [by_seed[s]["vs_clean"] for s in seeds if s in by_seed]
        undone = sum(n for s in by_seed.values() for _, _, n in s["rollbacks"])
        stops = [s["stopped"] for s in by_seed.values() if s["stopped"] is not None]
        out.append([run, "" if k is None else str(k)]
                   + [f"{by_seed[s]['final_loss']:.5f}" if s in by_seed else "" for s in seeds]
                   + [f"{max(ratios):.3f}", f"{sum(ratios) / len(ratios):.3f}",
                      str(undone) if k is not None else "",
                      f"stopped x{len(stops)}" if stops else ""])
    return out, (["run", "K"] + [f"seed {s}" for s in seeds]
                 + ["worst vs clean", "mean", "undone", ""])
