"""Detection keeps no tensor alive between steps: 1,000 training steps, no growth."""

from __future__ import annotations

import gc
import tracemalloc
import warnings
import weakref

import pytest
import torch

import nanguard
from nanguard.torch.detector._state import STATE

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


def _live_tensors() -> int:
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # isinstance() pokes deprecated torch objects
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


@pytest.mark.parametrize("exhaustive", MODES)
def test_thousand_steps_no_growth(exhaustive):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    steps = 1000 if not exhaustive else 300
    previous = []
    with nanguard.detect(exhaustive=exhaustive):
        act = STATE.stack[-1]

        def step():
            opt.zero_grad()
            h = model(x)
            loss = torch.nn.functional.mse_loss(h, y) + 0.0 * torch.tanh(h).sum()   # top-level ops too
            loss.backward()
            opt.step()
            return h, loss

        def run(n):
            nonlocal previous
            for _ in range(n):
                h, loss = step()
                # Nothing from the previous step is alive once its loss is dropped ...
                assert all(r() is None for r in previous)
                previous = [weakref.ref(h), weakref.ref(loss)]
                del h, loss
                # ... and the tape is empty after every backward.
                assert len(act.tape) == 0

        run(50)                                   # warm up caches (first-use allocations)
        tensors_before = _live_tensors()
        tracemalloc.start()
        run(steps // 2)
        gc.collect()
        middle = tracemalloc.get_traced_memory()[0]
        run(steps // 2)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - middle
        tracemalloc.stop()
        tensors_after = _live_tensors()
    assert tensors_after <= tensors_before, "tensors accumulate across steps"
    # The second half allocates (almost) nothing that stays. A tensor kept per step would cost
    # hundreds of bytes of Python objects per step; PyTorch's own dispatch-mode machinery
    # accounts for a few kB per thousand calls.
    assert grown < 64 * 1024, f"python memory grew by {grown} bytes over {steps // 2} steps"


def test_graph_never_differentiated_is_released():
    """A validation forward with grad enabled and no backward: its tape entries die with it."""
    model = _model()
    with nanguard.detect():
        act = STATE.stack[-1]
        for _ in range(20):
            out = model(torch.randn(4, 8))
            val = (out * 2).mean()
            assert len(act.tape) <= 3            # this step's entries only
            ref = weakref.ref(out)
            del out, val
            assert ref() is None
            assert len(act.tape) == 0


def test_retained_graph_released_after_last_backward():
    model = _model()
    with nanguard.detect():
        act = STATE.stack[-1]
        loss = model(torch.randn(4, 8)).sum()
        loss.backward(retain_graph=True)
        assert len(act.tape) > 0                 # may still be replayed
        loss.backward()
        assert len(act.tape) == 0


def test_context_exit_drops_everything():
    model = _model()
    d = nanguard.detect()
    with d:
        out = model(torch.randn(4, 8))
        act = STATE.stack[-1]
    assert len(act.tape) == 0 and out.requires_grad


# ---------------------------------------------------------------- issue 14: the loss in the loop
def _intermediate_freed_before_backward(exhaustive: bool):
    model = _model()
    x = torch.randn(4, 8)
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        h = model(x)
        wide = h.float() + 1.0             # add saves nothing of its input: h is the program's to free
        shifted = wide[1:].contiguous()
        loss = shifted.sum()
        probes = [weakref.ref(h), weakref.ref(wide)]
        del h, wide, shifted
        gc.collect()
        freed = [r() is None for r in probes]
        loss.backward()
    return freed, d.report


@pytest.mark.parametrize("exhaustive", MODES)
def test_the_tape_does_not_keep_intermediates_the_program_freed(exhaustive):
    freed, report = _intermediate_freed_before_backward(exhaustive)
    assert freed == [True, True]       # the logits' copies of a loss in the loop are not held
    assert report is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_backward_replay_recomputes_freed_intermediates(exhaustive):
    model = _model()
    x = torch.randn(4, 8)
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        h = model(x)
        gap = (h + 1.0) - (h + 1.0)
        probe = weakref.ref(h)
        del h
        root = torch.sqrt(gap)             # FREED-INTERMEDIATE: sqrt at 0, inf gradient
        gc.collect()
        assert probe() is None             # the replay must recompute h from the module call
        root.sum().backward()
    report = d.report
    assert report is not None and report.phase == "backward" and report.node == "SqrtBackward0"
    assert report.code.endswith("# FREED-INTERMEDIATE: sqrt at 0, inf gradient")
