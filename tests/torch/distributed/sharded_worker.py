"""One rank of the 2-process gloo tests in test_sharded.py (run as a script, not collected).

    python sharded_worker.py SCENARIOS RANK WORLD STORE_FILE OUT_JSON

SCENARIOS is a comma-separated list of "<model>-<mode>-<health>": model "tp" (a block whose
up-projection is ColwiseParallel and down-projection RowwiseParallel, the log between them a
DTensor op), "fsdp" (FSDP2 with fully_shard on each Linear and the root), "fsdpbw" (the same,
the NaN made in the backward pass; "fsdpopt": an Adam step that makes NaN in the sharded
parameters on every rank; "fsdpbig": rank 1's batch overflows l1, an FSDP unit), "ddp" (DistributedDataParallel, backward NaN) or "redist"
(top-level DTensor code whose softmax all-gathers the shards) or "rsbuf" (a top-level
reduce_scatter into a buffer that holds NaN before it is written), mode "default" or
"exhaustive", health "bad" (rank 1 makes a NaN at the line marked PLANT) or "good". Each runs
two training steps under ``nanguard.detect(mode="record")`` on every rank and writes the
report each rank kept (or null).
"""

from __future__ import annotations

import datetime
import json
import sys
import traceback

import torch
import torch.distributed as dist
from torch import nn

import nanguard
from tests.shared import leave

torch.set_num_threads(1)


class TPBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(4, 8)
        self.down = nn.Linear(8, 4)

    def forward(self, x):
        h = self.up(x)        # a DTensor sharded on its last dim (ColwiseParallel(use_local_output=False))
        h = torch.log(h)      # PLANT-TP
        return self.down(h)


class Plant(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x):
        return torch.sqrt(x.abs() - self.shift)  # PLANT-FSDP


class BackwardPlant(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.zero = shift != 0.0

    def forward(self, x):
        x = x * 0.0 if self.zero else x.abs() + 1.0
        return torch.sqrt(x)  # PLANT-BACKWARD


class Net(nn.Module):
    def __init__(self, shift: float, backward: bool = False) -> None:
        super().__init__()
        self.l1 = nn.Linear(4, 8)
        self.plant = BackwardPlant(shift) if backward else Plant(shift)
        self.l2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(self.plant(self.l1(x)))  # CALLS-FSDP-UNITS


def tp_model(rank: int, bad: bool) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    block = TPBlock()
    with torch.no_grad():
        block.up.weight.fill_(0.5)
        block.up.bias.fill_(0.1)
        if bad:
            block.up.weight[5] = -0.5   # output feature 5 lives on rank 1 (features 4..7)
        block.down.weight.fill_(0.1)
        block.down.bias.zero_()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    return parallelize_module(block, mesh, {"up": ColwiseParallel(use_local_output=False), "down": RowwiseParallel()})


def fsdp_model(rank: int, bad: bool, backward: bool = False) -> nn.Module:
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    net = Net(shift=1e3 if bad and rank == 1 else 0.0, backward=backward)
    fully_shard(net.l1)
    fully_shard(net.l2)
    fully_shard(net)
    return net


def redistribution(rank: int, bad: bool) -> list:
    """Top-level DTensor code: softmax over the sharded dim makes DTensor all-gather the shards
    inside its own dispatch, so rank 0 receives rank 1's NaN without a visible collective."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    shard = torch.full((2, 3), 1.0)
    if bad and rank == 1:
        shard = torch.log(shard - 2.0)  # PLANT-REDISTRIBUTE
    x = DTensor.from_local(shard, mesh, [Shard(0)])
    y = torch.softmax(x, dim=0)  # RECEIVED-REDISTRIBUTE
    return [float(v) for v in y.to_local().reshape(-1)[:1]]


def reduce_scatter_into_a_stale_buffer(rank: int, bad: bool) -> list:
    """reduce_scatter writes its output buffer without reading it; FSDP2's comes from new_empty,
    whose old bytes may be a NaN pattern. Rank 0 sends only finite values, so a NaN in its
    output came from rank 1 even though the buffer held NaN before the collective."""
    buffer = torch.full((2,), float("nan"))
    sent = torch.ones(4)
    if bad and rank == 1:
        sent = torch.log(sent - 2.0)  # PLANT-RSBUF
    dist.reduce_scatter_tensor(buffer, sent)  # RECEIVED-RSBUF
    return [float(v) for v in buffer]


def ddp_model(rank: int, bad: bool) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    return DistributedDataParallel(Net(shift=1e3 if bad and rank == 1 else 0.0, backward=True))


def run(scenario: str, rank: int) -> dict:
    model_kind, mode, health = scenario.split("-")
    bad = health == "bad"
    if model_kind in ("redist", "rsbuf"):
        with nanguard.detect(mode="record", exhaustive=mode == "exhaustive") as d:
            losses = (redistribution if model_kind == "redist" else reduce_scatter_into_a_stale_buffer)(rank, bad)
        return {"report": d.report.to_dict() if d.report is not None else None, "losses": losses}
    if model_kind == "tp":
        model = tp_model(rank, bad)
    elif model_kind == "ddp":
        model = ddp_model(rank, bad)
    else:
        model = fsdp_model(rank, bad and model_kind in ("fsdp", "fsdpbw"), model_kind == "fsdpbw")
    if model_kind == "fsdpopt":   # zero inputs: l1.weight's gradient is exactly 0, and Adam with eps=0 divides 0/0
        opt = torch.optim.Adam(model.parameters(), lr=0.01, eps=0.0 if bad else 1e-8)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)   # data parallel for FSDP; the same input for TP
    losses = []
    with nanguard.detect(mode="record", exhaustive=mode == "exhaustive") as d:
        for _ in range(2):
            x = torch.rand(3, 4, generator=g if model_kind != "tp" else None) + 0.1
            if model_kind == "tp":
                x = torch.full((3, 4), 0.5)
            elif model_kind == "fsdpopt":
                x = torch.zeros(3, 4)
            elif model_kind == "fsdpbig" and bad and rank == 1:
                x = x * 3e38   # finite, but l1 (an FSDP unit itself) overflows on rank 1
            loss = model(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(loss.detach().full_tensor() if hasattr(loss, "full_tensor") else loss.detach()))
    return {"report": d.report.to_dict() if d.report is not None else None, "losses": losses}


def main() -> int:
    scenarios, rank, world, store, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=45))
    results = {}
    try:
        for scenario in scenarios.split(","):
            results[scenario] = run(scenario, rank)
            dist.barrier()
    except Exception:
        traceback.print_exc()
        return 1
    with open(out_path, "w") as fh:
        json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    leave(main())
