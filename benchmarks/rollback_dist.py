"""Planted spikes under DDP and FSDP2, 2 ranks (gloo, CPU): what policy "rollback" recovers.

The 1-process planted runs (`rollback_planted.py`) on a smaller benchmark transformer (2
layers, d_model 64, batch 8x16 a rank, 300 steps) so two CPU processes finish in minutes.
Each rank draws its own batches; the three plants are those of the 1-process runs, each on
one rank: rank 1's batch x1000 at steps/3, the learning rate x100 for the update of step
7*steps/12 (the loop's, on both ranks), an inf written after the update of step 5*steps/6
into a parameter element that rank 1 holds (FSDP2: its own shard). Scored by the held-out
loss of the trained model (both ranks' batches) against a clean run, and by whether the
ranks end bitwise equal (DDP: the replicas; FSDP2: the full parameters and Adam moments,
all-gathered).

    .venv/bin/python benchmarks/rollback_dist.py [--steps 300] [--seeds 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import sys
import tempfile
import warnings
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from benchmarks.common import print_table, transformer  # noqa: E402
from benchmarks.rollback_planted import SPIKE, plant_steps  # noqa: E402
from nanguard import NonFiniteError  # noqa: E402
from nanguard.core.guard_policy import DEFAULT_SNAPSHOT_EVERY  # noqa: E402
from nanguard.torch.guard import GradGuard  # noqa: E402

D, LR = 64, 1e-3


def batch(step: int, rank: int, teacher: torch.Tensor, seed: int):
    g = torch.Generator().manual_seed(10 ** 6 * seed + 1000 * step + rank)
    x = torch.randn(8, 16, D, generator=g)
    return x, torch.tanh(x @ teacher) + 0.1 * torch.randn(8, 16, 1, generator=g)


def wrap(kind: str, seed: int) -> torch.nn.Module:
    net = transformer(d_model=D, heads=4, ff=128, layers=2, seed=seed)
    if kind == "ddp":
        return torch.nn.parallel.DistributedDataParallel(net)
    from torch.distributed.fsdp import fully_shard

    for layer in net[0].layers:
        fully_shard(layer)
    fully_shard(net)
    return net


def local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def fingerprint(model: torch.nn.Module, opt: torch.optim.Optimizer) -> str:
    """The full parameters and Adam moments (all-gathered from FSDP2's shards; every rank
    calls it)."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(full(p.detach()).contiguous().numpy().tobytes())
        for k in ("exp_avg", "exp_avg_sq"):
            state = opt.state.get(p, {})
            if k in state:
                h.update(full(state[k]).contiguous().numpy().tobytes())
    return h.hexdigest()


def run(kind: str, rank: int, steps: int, seed: int, plant: bool, **guard_args: Any) -> Dict[str, Any]:
    at = plant_steps(steps, seed)
    teacher = torch.randn(D, 1, generator=torch.Generator().manual_seed(1 + seed)) / D ** 0.5
    model = wrap(kind, seed)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    guard = GradGuard(opt, model=model, **guard_args)
    target = next(p for p in model.parameters() if local(p).numel() > 0)  # rank 1 holds some
    stopped = None
    for step in range(steps):
        x, y = batch(step, rank, teacher, seed)
        if plant and rank == 1 and step == at["batch"]:
            x, y = x * 1e3, y * 1e3
        lr = LR * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for group in opt.param_groups:
            group["lr"] = lr * (100.0 if plant and step == at["lr"] else 1.0)
        opt.zero_grad(set_to_none=True)
        try:
            guard.backward(torch.nn.functional.mse_loss(model(x), y))
            applied = guard.step()
        except NonFiniteError:
            stopped = step
            break
        if plant and rank == 1 and step == at["fp16"] and applied:
            with torch.no_grad():
                local(target).view(-1)[0] = float("inf")
    with torch.no_grad():
        held = [batch(10 ** 5 + i, r, teacher, seed) for i in range(4) for r in range(2)]
        final = sum(float(torch.nn.functional.mse_loss(model(x), y)) for x, y in held) / len(held)
    return {"final_loss": final if math.isfinite(final) else math.inf, "stopped": stopped,
            "fingerprint": fingerprint(model, opt),
            "rollbacks": [(e.step, e.kind, e.steps_undone) for e in guard.records.events
                          if e.action == "rolled back"]}


def worker(rank: int, store: str, out_dir: str, steps: int, seeds: List[int], k: int) -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    rows = []
    for kind in ("ddp", "fsdp2"):
        for seed in seeds:
            for name, plant, args in (
                    ("clean", False, {}), ("skip-only", True, {}),
                    ("rollback", True, dict(policy="rollback", snapshot_every=k, spike=SPIKE))):
                r = run(kind, rank, steps, seed, plant, **args)
                r.update(kind=kind, seed=seed, run=name)
                rows.append(r)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(rows, f)
    dist.destroy_process_group()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--snapshot-every", type=int, default=DEFAULT_SNAPSHOT_EVERY)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.spawn(worker, args=(os.path.join(tmp, "store"), tmp, args.steps,
                                                  args.seeds, args.snapshot_every), nprocs=2)
        ranks = [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in range(2)]
    clean = {(r["kind"], r["seed"]): r["final_loss"] for r in ranks[0] if r["run"] == "clean"}
    rows = []
    for r0, r1 in zip(*ranks):
        r0["vs_clean"] = r0["final_loss"] / clean[(r0["kind"], r0["seed"])]
        r0["ranks_equal"] = r0["fingerprint"] == r1["fingerprint"]
        rows.append(r0)
    at = plant_steps(args.steps)
    print(f"2 ranks (gloo, CPU), {args.steps} steps, K={args.snapshot_every}: rank 1's batch "
          f"x1000 at step {at['batch']}, the LR x100 at step {at['lr']}, an inf in rank 1's "
          f"weights after step {at['fp16']}")
    print_table([[r["kind"], str(r["seed"]), r["run"], f"{r['final_loss']:.5f}",
                  f"{r['vs_clean']:.3f}", "yes" if r["ranks_equal"] else "NO",
                  "; ".join(f"step {s}: {kind}, {n} undone" for s, kind, n in r["rollbacks"]),
                  "" if r["stopped"] is None else f"stopped at step {r['stopped']}"]
                 for r in rows],
                ["wrapper", "seed", "run", "final loss", "vs clean", "ranks equal",
                 "rollbacks", ""])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
