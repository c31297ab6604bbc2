"""Detection reads values and never changes them: outputs, gradients, parameters and the random
stream are bitwise identical with it on and off, even after a replay."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import nanguard

NEG = float("-inf")


class Model(torch.nn.Module):
    """Dropout (random), batch norm (running statistics), attention with a -inf mask, and a
    module whose output is deliberately -inf (which makes the default mode replay it once)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(6, 16)
        self.norm = torch.nn.BatchNorm1d(16)
        self.drop = torch.nn.Dropout(0.3)
        self.attn = torch.nn.MultiheadAttention(16, 2, dropout=0.1, batch_first=True)
        self.head = torch.nn.Linear(16, 4)
        self.legal = torch.tensor([True, True, False, True])

    def forward(self, x):
        b, t, _ = x.shape
        h = self.drop(torch.relu(self.norm(self.embed(x).reshape(b * t, -1)).reshape(b, t, -1)))
        causal = torch.full((t, t), NEG).triu(1)
        h, _ = self.attn(h, h, h, attn_mask=causal)
        return self.head(h).masked_fill(~self.legal, NEG)


def _train(ctx_factory, steps=3):
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    outs, grads = [], []
    with ctx_factory():
        for _ in range(steps):
            opt.zero_grad()
            logits = model(torch.randn(3, 5, 6))
            loss = -F.log_softmax(logits, -1)[..., 0].mean() + torch.rand(()) * 0
            loss.backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            opt.step()
            outs.append(logits.detach().clone())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    return outs, grads, state, torch.get_rng_state()


@pytest.mark.parametrize("factory", [
    pytest.param(lambda: nanguard.detect(), id="default"),
    pytest.param(lambda: nanguard.detect(exhaustive=True), id="exhaustive"),
    pytest.param(lambda: nanguard.detect(mode="record", check="nan"), id="record-nan"),
])
def test_bitwise_identical_training(factory):
    ref = _train(lambda: torch.enable_grad())
    got = _train(factory)
    for a, b in zip(ref[0], got[0]):
        assert torch.equal(a, b)
    for ga, gb in zip(ref[1], got[1]):
        for a, b in zip(ga, gb):
            assert torch.equal(a, b)
    for k in ref[2]:
        assert torch.equal(ref[2][k], got[2][k]), k
    assert torch.equal(ref[3], got[3]), "the random stream moved"


class Exp(torch.nn.Module):
    def forward(self, x):
        return torch.exp(x)


def test_replay_after_a_finding_leaves_rng_and_state_untouched():
    """A recorded finding replays a module with dropout and batch norm; the program then
    continues exactly as it would have without detection."""
    def run(detect: bool):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), Exp(), torch.nn.BatchNorm1d(8),
                                    torch.nn.Linear(8, 2))
        x = torch.randn(6, 4)
        x[0] = 400.0                             # exp overflows after the first Linear
        ctx = nanguard.detect(mode="record") if detect else torch.enable_grad()
        with ctx:
            y = model(x)
            after = torch.rand(3)
        if detect:
            assert ctx.report is not None and ctx.report.module == "model.2"   # found by a replay
        return y.detach(), after, model[3].running_mean.clone(), model[3].num_batches_tracked.clone()
    plain, detected = run(False), run(True)
    for a, b in zip(plain, detected):
        assert torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))


def test_replayed_backward_does_not_touch_grads_or_hooks():
    calls = []
    w = torch.tensor([0.0, 1.0], requires_grad=True)
    w.register_hook(lambda g: calls.append(g.clone()))
    with nanguard.detect(mode="record") as d:
        torch.sqrt(w).sum().backward()
    assert d.report is not None and d.report.node == "SqrtBackward0"
    assert len(calls) == 1                       # the user's hook ran once: the replay has no hooks
    assert torch.isinf(w.grad[0]) and w.grad[1] == 0.5   # .grad holds the real backward's result only
