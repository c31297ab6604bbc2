"""One rank of the 2-process gloo tests in test_guard_ddp.py (run as a script, not collected).

    python ddp_worker.py SCENARIO RANK WORLD STORE_FILE OUT_JSON

Each scenario trains a small model for a few steps and writes, per step, the guard's decision
and a fingerprint of the parameters, so the test can compare the ranks.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sys
import traceback

import torch
import torch.distributed as dist

import nanguard
from tests.shared import SqrtNet, leave

torch.set_num_threads(1)


def make_net() -> SqrtNet:
    torch.manual_seed(0)  # identical replicas on every rank
    return SqrtNet()


def data(seed: int, zero_row: bool = False, nan_input: bool = False):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)
    if zero_row:
        x[0] = 0.0  # NaN gradient, finite loss
    if nan_input:
        x[1, 2] = float("nan")  # NaN loss
    return x, y


def fingerprint(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def local_finite(module: torch.nn.Module) -> bool:
    return all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def scenario_ddp(rank: int) -> dict:
    """DDP; rank 1 alone gets a batch with a NaN gradient (step 2) and one with a NaN loss (4)."""
    model = torch.nn.parallel.DistributedDataParallel(make_net())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model)
    out = {"decisions": [], "params": [fingerprint(model)]}
    for step in range(6):
        x, y = data(100 * step + rank, zero_row=(rank == 1 and step == 2),
                    nan_input=(rank == 1 and step == 4))
        opt.zero_grad()
        loss = loss_fn(model, x, y)
        if not guard.check_loss(loss):
            out["decisions"].append("loss")
            out["params"].append(fingerprint(model))
            continue
        loss.backward()
        out["decisions"].append(guard.step())
        out["params"].append(fingerprint(model))
    out["events"] = [e.to_dict() for e in guard.records.events]
    out["summary"] = guard.summary()
    return out


def scenario_no_sync(rank: int) -> dict:
    """DDP gradient accumulation: micro-batch 0 under no_sync(), micro-batch 1 synchronised.
    At step 1 only rank 1's *local* micro-batch-0 gradient is NaN."""
    model = torch.nn.parallel.DistributedDataParallel(make_net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
    guard = nanguard.GradGuard(opt, model=model)
    out = {"decisions": [], "params": [fingerprint(model)], "local_finite_after_micro0": []}
    for step in range(4):
        opt.zero_grad()
        with model.no_sync():
            x, y = data(1000 * step + 10 * rank, zero_row=(rank == 1 and step == 1))
            (loss_fn(model, x, y) / 2).backward()
        out["local_finite_after_micro0"].append(local_finite(model))
        x, y = data(1000 * step + 10 * rank + 1)
        (loss_fn(model, x, y) / 2).backward()  # synchronised: the all-reduce happens here
        out["decisions"].append(guard.step())
        out["params"].append(fingerprint(model))
    out["events"] = [e.to_dict() for e in guard.records.events]
    return out


def scenario_local(rank: int) -> dict:
    """No DDP: replicas step on their own gradients (as inside no_sync() or with local SGD).
    Same data on both ranks, except that rank 1's gradient is NaN at step 2 and finite but
    overflowing the float32 norm (1e30) at step 3. Run with and without agreement, with a
    GradScaler, and with policy 'raise' (every rank must raise, or the others would block in
    their next collective)."""
    out = {}
    for mode, distributed in (("agreed", None), ("local", False)):
        model = make_net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        guard = nanguard.GradGuard(opt, model=model, distributed=distributed)
        decisions, prints = [], []
        for step in range(5):
            opt.zero_grad()
            x, y = data(step, zero_row=(rank == 1 and step == 2))
            loss_fn(model, x, y).backward()
            if rank == 1 and step == 3:
                model.head.weight.grad.fill_(1e30)
                opt.param_groups[0]["lr"] = 1e-40
            decisions.append(guard.step())
            opt.param_groups[0]["lr"] = 0.1
            prints.append(fingerprint(model))
        out[mode] = {"decisions": decisions, "params": prints,
                     "events": [e.to_dict() for e in guard.records.events]}
    # with a GradScaler: rank 1 overflows alone; both skip and both scalers back off
    model = make_net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    guard = nanguard.GradGuard(opt, scaler=scaler)
    amp = {"decisions": [], "scales": []}
    for step in range(3):
        opt.zero_grad()
        scaler.scale(loss_fn(model, *data(step))).backward()
        if rank == 1 and step == 1:
            model.head.bias.grad.fill_(float("inf"))
        amp["decisions"].append(guard.step())
        scaler.update()
        amp["scales"].append(scaler.get_scale())
    amp["params"] = fingerprint(model)
    out["amp"] = amp
    model = make_net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, policy="raise", model=model)
    loss_fn(model, *data(7, zero_row=(rank == 1))).backward()
    try:
        guard.step()
        out["raised"] = None
    except nanguard.NonFiniteError as e:
        out["raised"] = str(e)
    dist.barrier()  # both ranks must still be in step with each other after raising
    return out


def scenario_window(rank: int) -> dict:
    """DDP accumulation through guard.backward: 2 micro-batches per step, the first under
    no_sync(). Rank 1 alone has a NaN loss in the synchronised micro-batch of step 1: both ranks
    must skip that window's backward (or rank 0 would wait in the all-reduce), skip the step,
    and stay identical. accumulation='drop' is refused under torch.distributed."""
    model = torch.nn.parallel.DistributedDataParallel(make_net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    guard = nanguard.GradGuard(opt, model=model, scheduler=sched)
    out = {"decisions": [], "params": [fingerprint(model)], "ran": [], "lr": []}
    for step in range(4):
        opt.zero_grad()
        with model.no_sync():
            out["ran"].append(guard.backward(loss_fn(model, *data(1000 * step + 10 * rank)) / 2))
        x, y = data(1000 * step + 10 * rank + 1, nan_input=(rank == 1 and step == 1))
        out["ran"].append(guard.backward(loss_fn(model, x, y) / 2))
        out["decisions"].append(guard.step())
        out["params"].append(fingerprint(model))
        out["lr"].append(opt.param_groups[0]["lr"])
    out["events"] = [e.to_dict() for e in guard.records.events]
    dropper = nanguard.GradGuard(opt, accumulation="drop")
    try:
        dropper.backward(loss_fn(model, *data(0)))
        out["drop"] = "accepted"
    except ValueError as error:
        out["drop"] = str(error)
    return out


def state_fingerprint(model: torch.nn.Module, opt: torch.optim.Optimizer, full: bool) -> str:
    """Parameters, Adam moments and step counts: all-gathered from an FSDP2 model's DTensors
    (`full`; every rank calls it) or this rank's own tensors (FSDP1's flat shards, FSDP2's
    local shards)."""
    h = hashlib.sha256()
    tensors = [p.detach() for p in model.parameters()]
    tensors += [v for s in opt.state.values() for k, v in sorted(s.items()) if k != "step"]
    h.update(repr([float(s["step"]) for s in opt.state.values() if "step" in s]).encode())
    for t in tensors:
        if full:
            t = t.full_tensor()
        elif hasattr(t, "to_local"):
            t = t.to_local()  # this rank's FSDP2 shard
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def scenario_fsdp2(rank: int) -> dict:
    """FSDP2 (fully_shard on each Linear and the root): every parameter a DTensor, each rank a
    shard (head.weight 1x8 and head.bias 1 are wholly on rank 0: rank 1's shards are empty).
    Step 2: rank 1's batch has a zero row (NaN gradient after the reduce-scatter, on every
    shard); the guard clips at 0.05 with the full gradients' norm, which is compared with
    torch's own clip_grad_norm_ on the DTensors; step 4 (policy "zero") zeroes the NaN."""
    from torch.distributed.fsdp import fully_shard

    model = make_net()
    fully_shard(model.embed)
    fully_shard(model.head)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model, monitor=True)
    params = list(model.parameters())
    out = {"decisions": [], "fingerprints": [state_fingerprint(model, opt, full=True)], "totals": [],
           "torch_totals": [], "grads_match_torch": [], "local_numel": [],
           "module_norms": []}
    out["local_numel"] = [p.to_local().numel() for p in params]
    for step in range(4):
        opt.zero_grad()
        x, y = data(100 * step + rank, zero_row=(rank == 1 and step == 2))
        guard.backward(loss_fn(model, x, y))
        saved = [p.grad.to_local().clone() for p in params]
        torch_total = torch.nn.utils.clip_grad_norm_(params, 0.05)
        torch_total = float(torch_total.full_tensor() if hasattr(torch_total, "full_tensor")
                            else torch_total)
        torch_clipped = [p.grad.full_tensor().clone() for p in params]
        for p, g in zip(params, saved):
            p.grad.to_local().copy_(g)
        total = float(guard.clip_grad_norm_(0.05))
        if step != 2:
            out["grads_match_torch"].append(all(
                torch.allclose(p.grad.full_tensor(), c, rtol=1e-6, atol=0)
                for p, c in zip(params, torch_clipped)))
        out["totals"].append(total)
        out["torch_totals"].append(torch_total)
        out["decisions"].append(guard.step())
        out["fingerprints"].append(state_fingerprint(model, opt, full=True))
    out["module_norms"] = [row for _, row in guard.monitor.history.rows]
    out["events"] = [e.to_dict() for e in guard.records.events]
    out["summary"] = guard.summary()
    out["safe_before"] = guard.safe_to_save()
    zeroing = nanguard.GradGuard(opt, policy="zero", model=model)
    opt.zero_grad()
    zeroing.backward(loss_fn(model, *data(7, zero_row=(rank == 1))))
    out["zero_applied"] = zeroing.step()
    out["zero_event"] = zeroing.records.events[0].to_dict()
    out["finite_after_zero"] = all(bool(torch.isfinite(p.full_tensor()).all()) for p in params)
    if rank == 1:
        with torch.no_grad():
            model.embed.weight.to_local()[0, 0] = float("nan")
    with __import__("warnings").catch_warnings(record=True):
        out["safe_after_poison"] = guard.safe_to_save()
    out["nonfinite_state"] = guard.nonfinite_state()
    local_guard = nanguard.GradGuard(opt, model=model, distributed=False)
    opt.zero_grad()
    loss_fn(model, *data(8)).backward()
    try:
        local_guard.step()
        out["local_guard"] = "accepted"
    except ValueError as error:
        out["local_guard"] = str(error)
    return out


def scenario_fsdp1(rank: int, use_orig_params: bool) -> dict:
    """FSDP1 (FullyShardedDataParallel, FULL_SHARD, one unit): each rank holds a 1-d slice of
    the flattened parameters (41 elements, 21 + 20; with use_orig_params, head's slices are
    empty on rank 0 and their grad None). Step 2: rank 1's zero row (NaN after the
    reduce-scatter); the guard's clip is compared with FSDP1's own model.clip_grad_norm_."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(make_net(), use_orig_params=use_orig_params, device_id=torch.device("cpu"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model, monitor=True)
    params = list(model.parameters())
    out = {"decisions": [], "fingerprints": [state_fingerprint(model, opt, full=False)], "totals": [],
           "fsdp_totals": [], "grads_match_fsdp": [], "names": list(guard._table.names)}
    for step in range(4):
        opt.zero_grad()
        x, y = data(100 * step + rank, zero_row=(rank == 1 and step == 2))
        guard.backward(loss_fn(model, x, y))
        saved = [None if p.grad is None else p.grad.clone() for p in params]
        fsdp_total = float(model.clip_grad_norm_(0.05))
        fsdp_clipped = [None if p.grad is None else p.grad.clone() for p in params]
        for p, g in zip(params, saved):
            if g is not None:
                p.grad.copy_(g)
        total = float(guard.clip_grad_norm_(0.05))
        if step != 2:
            out["grads_match_fsdp"].append(all(
                g is None or torch.allclose(p.grad, g, rtol=1e-6, atol=0)
                for p, g in zip(params, fsdp_clipped)))
        out["totals"].append(total)
        out["fsdp_totals"].append(fsdp_total)
        out["decisions"].append(guard.step())
        out["fingerprints"].append(state_fingerprint(model, opt, full=False))
    out["module_norms"] = [row for _, row in guard.monitor.history.rows]
    out["events"] = [e.to_dict() for e in guard.records.events]
    out["summary"] = guard.summary()
    return out


ROLLBACK = dict(policy="rollback", snapshot_every=2, spike=dict(loss=5.0, window=3),
                lr_backoff=0.5)


def rollback_batch(step: int, rank: int):
    """Rank `rank`'s batch of `step`: rank 1's has a zero row at step 3 (a NaN gradient, a
    finite loss) and targets 1000x too large at step 7 (a finite loss spike)."""
    x, y = data(100 * step + rank, zero_row=(rank == 1 and step == 3))
    return x, (y * 1e3 if rank == 1 and step == 7 else y)


def scenario_rollback(rank: int) -> dict:
    """DDP, policy "rollback" (snapshots before the updates of steps 0, 2, 4, ...): rank 1's
    NaN gradient at step 3 and its loss spike at step 7 roll both ranks back. Then, on each
    rank, the single-process run on both ranks' batches (the gradient DDP averages, from the
    mean of the two losses): the same decisions and the same bits."""
    model = torch.nn.parallel.DistributedDataParallel(make_net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model, **ROLLBACK)
    out = {"decisions": [], "fingerprints": [state_fingerprint(model, opt, full=False)]}
    for step in range(9):
        opt.zero_grad()
        guard.backward(loss_fn(model, *rollback_batch(step, rank)))
        out["decisions"].append(guard.step())
        out["fingerprints"].append(state_fingerprint(model, opt, full=False))
    out["events"] = [e.to_dict() for e in guard.records.events]
    out["lr_scale"] = guard.lr_scale
    net = make_net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    single = nanguard.GradGuard(opt, model=net, distributed=False, **ROLLBACK)
    out["single_decisions"] = []
    out["single_fingerprints"] = [state_fingerprint(net, opt, full=False)]
    for step in range(9):
        opt.zero_grad()
        losses = [loss_fn(net, *rollback_batch(step, r)) for r in range(2)]
        single.backward((losses[0] + losses[1]) / 2)
        out["single_decisions"].append(single.step())
        out["single_fingerprints"].append(state_fingerprint(net, opt, full=False))
    return out


def scenario_fsdp2_rollback(rank: int) -> dict:
    """FSDP2 under policy "rollback": every rank snapshots and restores its own shards (head's
    are all on rank 0); the same NaN gradient and loss spike of rank 1 as scenario_rollback."""
    from torch.distributed.fsdp import fully_shard

    model = make_net()
    fully_shard(model.embed)
    fully_shard(model.head)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model, **ROLLBACK)
    out = {"decisions": [], "fingerprints": [state_fingerprint(model, opt, full=True)],
           "local": []}
    for step in range(9):
        opt.zero_grad()
        guard.backward(loss_fn(model, *rollback_batch(step, rank)))
        out["decisions"].append(guard.step())
        out["fingerprints"].append(state_fingerprint(model, opt, full=True))
        out["local"].append(state_fingerprint(model, opt, full=False))
    out["events"] = [e.to_dict() for e in guard.records.events]
    return out


SCENARIOS = {"ddp": scenario_ddp, "no_sync": scenario_no_sync, "local": scenario_local,
             "window": scenario_window, "fsdp2": scenario_fsdp2,
             "fsdp1": lambda rank: scenario_fsdp1(rank, False),
             "fsdp1_orig": lambda rank: scenario_fsdp1(rank, True),
             "rollback": scenario_rollback, "fsdp2_rollback": scenario_fsdp2_rollback}


def main() -> int:
    scenario, rank, world, store, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    try:
        result = SCENARIOS[scenario](rank)
    except Exception:
        traceback.print_exc()
        return 1
    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    leave(main())
