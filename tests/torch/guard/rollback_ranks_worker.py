"""One rank of the 2-process gloo tests in test_rollback_ranks.py (run as a script, not
collected).

    python rollback_ranks_worker.py SCENARIO RANK WORLD STORE_FILE OUT_JSON

SCENARIO is WRAPPER-POLICY: WRAPPER "ddp" or "fsdp2", POLICY "rollback" or "skip". After the
update of step 2, rank 1 alone writes +inf into one element of its own copy of a parameter
(DDP: its replica; FSDP2: its shard), as a float16 update that overflows does; the next
forward is non-finite. Each step writes the guard's decision and a fingerprint of the full
state (parameters, Adam's moments and steps; FSDP2's all-gathered) as this rank holds it.
"""

from __future__ import annotations

import datetime
import json
import sys
import traceback

import torch
import torch.distributed as dist

import nanguard
from ddp_worker import data, loss_fn, make_net, state_fingerprint
from tests.shared import leave

torch.set_num_threads(1)

POISONED_AFTER = 2  # the update after which rank 1 holds an inf


def wrap(kind: str) -> torch.nn.Module:
    if kind == "ddp":
        return torch.nn.parallel.DistributedDataParallel(make_net())
    from torch.distributed.fsdp import fully_shard

    model = make_net()
    fully_shard(model.embed)
    fully_shard(model.head)
    fully_shard(model)
    return model


def local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def scenario(kind: str, policy: str, rank: int) -> dict:
    model = wrap(kind)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    args = dict(snapshot_every=2) if policy == "rollback" else {}
    guard = nanguard.GradGuard(opt, model=model, policy=policy, max_consecutive=None, **args)
    fsdp = kind == "fsdp2"
    out = {"decisions": [], "fingerprints": [state_fingerprint(model, opt, full=fsdp)],
           "finite": []}
    for step in range(7):
        opt.zero_grad()
        guard.backward(loss_fn(model, *data(100 * step + rank)))
        out["decisions"].append(guard.step())
        if step == POISONED_AFTER and rank == 1:
            target = next(p for p in model.parameters() if local(p).numel() > 0)
            with torch.no_grad():
                local(target).view(-1)[0] = float("inf")
        out["fingerprints"].append(state_fingerprint(model, opt, full=fsdp))
        out["finite"].append(all(bool(torch.isfinite(local(p)).all())
                                 for p in model.parameters()))
    out["events"] = [e.to_dict() for e in guard.records.events]
    return out


def main() -> int:
    name, rank, world, store, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    try:
        kind, policy = name.split("-")
        result = scenario(kind, policy, rank)
    except Exception:
        traceback.print_exc()
        return 1
    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    leave(main())
