"""The CUDA path: one device sync per finite step, and GradScaler("cuda") parity.

Skipped without a GPU. `torch.cuda.set_sync_debug_mode("warn")` emits a warning for every
operation that blocks the host on the device, so the count is exact.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import nanguard
from guard_helpers import assert_bitwise, loss_of, make_model, snapshot

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def count_syncs(fn) -> int:
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


@pytest.mark.parametrize("monitor", [False, True])
def test_a_finite_step_syncs_the_device_once(monitor):
    model = make_model(device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # foreach, no host reads of its own
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor)
    for seed in range(2):  # the first step builds caches; measure the second
        opt.zero_grad()
        loss_of(model, seed).backward()
        if seed == 0:
            guard.step()
    assert count_syncs(lambda: guard.step()) == 1


def test_amp_with_fused_adamw_matches_the_scaler_loop_and_syncs_once():
    def run(guarded):
        model = make_model(device="cuda")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
        scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 10)
        guard = nanguard.GradGuard(opt, scaler=scaler) if guarded else None
        syncs = []
        for step in range(4):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_of(model, step)
            scaler.scale(loss).backward()
            if step == 2:
                model.head.weight.grad[0, 0] = float("inf")
            if guarded:
                syncs.append(count_syncs(lambda: guard.step()))
            else:
                scaler.step(opt)
            scaler.update()
        return model, opt, scaler.get_scale(), syncs

    ref_model, ref_opt, ref_scale, _ = run(False)
    model, opt, scale, syncs = run(True)
    assert scale == ref_scale
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))
    assert syncs[1] == syncs[3] == 1  # finite steps after the first (state creation)


def test_rollback_keeps_its_snapshot_in_pinned_memory_and_restores_the_bits():
    model = make_model(device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)  # its step is on the GPU
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", snapshot_every=2)
    expected = None
    for step in range(5):  # snapshots before the updates of steps 0 and 2
        opt.zero_grad()
        guard.backward(loss_of(model, step))
        torch.rand(2, device="cuda")
        if step == 2:
            expected = dict(snapshot(model, opt), cuda_rng=torch.cuda.get_rng_state())
        if step == 4:
            model.head.bias.grad[0] = float("nan")
        assert guard.step() is (step < 4)
    assert_bitwise(dict(snapshot(model, opt), cuda_rng=torch.cuda.get_rng_state()), expected)
    buffers = guard._rollback.snapshot._store._buffers
    assert buffers and all(b.device.type == "cpu" and b.is_pinned() for b in buffers.values())
