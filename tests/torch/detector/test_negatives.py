"""Deliberate infinities and clean programs are not reported (tensorflow#40228)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import nanguard
from nanguard.torch.detector import boundaries

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]
NEG = float("-inf")


@pytest.mark.parametrize("exhaustive", MODES)
def test_masked_fill_minus_inf_softmax_forward_and_backward(exhaustive):
    scores = torch.randn(4, 5, requires_grad=True)
    keep = torch.rand(4, 5) > 0.3
    keep[:, 0] = True                                   # every row keeps one position
    with nanguard.detect(exhaustive=exhaustive) as d:
        masked = scores.masked_fill(~keep, NEG)
        probs = torch.softmax(masked, dim=-1)
        logp = F.log_softmax(masked, dim=-1)
        (probs * 2).sum().backward(retain_graph=True)
        logp.masked_fill(~keep, 0).sum().backward()
    assert d.report is None
    assert torch.isfinite(scores.grad).all()


@pytest.mark.parametrize("exhaustive", MODES)
def test_float_causal_mask_through_logsumexp_and_max(exhaustive):
    x = torch.randn(3, 3, requires_grad=True)
    causal = torch.full((3, 3), NEG).triu(1)            # a -inf constant
    with nanguard.detect(exhaustive=exhaustive) as d:
        s = x + causal
        lse = torch.logsumexp(s, -1)
        top = s.max(-1).values
        (lse + top).sum().backward()
    assert d.report is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_attention_with_causal_mask_training_step(exhaustive):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(6)   # float -inf above diagonal
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    with nanguard.detect(exhaustive=exhaustive) as d:
        for _ in range(2):
            opt.zero_grad()
            out = layer(torch.randn(2, 6, 16), src_mask=mask, is_causal=True)
            out.pow(2).mean().backward()
            opt.step()
    assert d.report is None


class MaskedPolicy(torch.nn.Module):
    """Returns logits with -inf on illegal actions: a module whose output is deliberately -inf."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 3)

    def forward(self, x, legal):
        return self.net(x).masked_fill(~legal, NEG)


@pytest.mark.parametrize("exhaustive", MODES)
def test_module_with_deliberate_minus_inf_output(exhaustive, monkeypatch):
    torch.manual_seed(0)
    policy = MaskedPolicy()
    legal = torch.tensor([[True, False, True], [True, True, False]])
    calls = []
    original = boundaries.replay_module_forward
    monkeypatch.setattr(boundaries, "replay_module_forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    with nanguard.detect(exhaustive=exhaustive) as d:
        for _ in range(5):
            logits = policy(torch.randn(2, 4), legal)
            dist = torch.distributions.Categorical(logits=logits)
            (-dist.log_prob(torch.tensor([0, 1]))).mean().backward()
    assert d.report is None
    # Default mode replays the module once to learn its -inf is deliberate, then trusts it.
    assert len(calls) == (0 if exhaustive else 1)


@pytest.mark.parametrize("exhaustive", MODES)
def test_sanitised_nan_data_is_not_reported(exhaustive):
    data = torch.tensor([1.0, float("nan"), 3.0])
    with nanguard.detect(exhaustive=exhaustive) as d:
        clean = torch.nan_to_num(data, nan=0.0)
        (clean * 2).sum()
    assert d.report is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_clean_training_loop_reports_nothing(exhaustive):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.LayerNorm(16), torch.nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with nanguard.detect(exhaustive=exhaustive) as d:
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(torch.randn(5, 8)), torch.tensor([0, 1, 2, 0, 1]))
            loss.backward()
            opt.step()
    assert d.report is None


class _CTCHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 6)

    def forward(self, x, targets, input_lengths, target_lengths):
        log_probs = self.proj(x).log_softmax(-1)
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)


def _ctc_batch(target_len: int):
    g = torch.Generator().manual_seed(0)
    T, N = 20, 2
    x = torch.randn(T, N, 8, generator=g)
    targets = torch.randint(1, 6, (N, target_len), generator=g)
    return x, targets, torch.full((N,), T), torch.full((N,), target_len)


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("inside_a_module", [False, True], ids=["top-level", "module"])
def test_ctc_loss_with_feasible_alignments_is_quiet(exhaustive, inside_a_module):
    """CTC keeps -inf log-alphas for unreachable states; the loss and its gradient are finite."""
    head = _CTCHead()
    x, targets, il, tl = _ctc_batch(5)
    with nanguard.detect(exhaustive=exhaustive) as d:
        if inside_a_module:
            loss = head(x, targets, il, tl)
        else:
            loss = F.ctc_loss(head.proj(x).log_softmax(-1), targets, il, tl)
        loss.backward()
    assert torch.isfinite(loss)
    assert d.report is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_ctc_loss_of_an_infeasible_alignment_is_reported(exhaustive):
    """Targets longer than the input: the loss is truly +inf (without zero_infinity)."""
    head = _CTCHead()
    x, targets, il, tl = _ctc_batch(25)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        head(x, targets, il, tl)
    assert d.report is not None and d.report.kind == "inf"
    assert "ctc_loss" in d.report.op


def _amp_steps(exhaustive: bool, bug: bool, steps: int = 3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    # a scale this large overflows float16 gradients at once: the scaler skips and halves it
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
    x, y = torch.randn(32, 64) * 10, torch.randint(0, 10, (32,))
    scales = []
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(steps):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(x)
                loss = F.cross_entropy(out, y)
                if bug:
                    loss = loss + torch.sqrt(out.float() - out.float()).sum()  # sqrt's gradient at 0
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
    return d.report, scales


@pytest.mark.parametrize("exhaustive", MODES)
def test_grad_scaler_overflow_is_the_scalers_not_a_finding(exhaustive):
    report, scales = _amp_steps(exhaustive, bug=False)
    assert scales == [2.0**23, 2.0**22, 2.0**21], "the scaler must have met (and skipped) overflows"
    assert report is None, report


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_real_singularity_under_a_grad_scaler_is_still_reported(exhaustive):
    report, _ = _amp_steps(exhaustive, bug=True, steps=1)
    assert report is not None and report.phase == "backward"
    assert "sqrt" in (report.torch_function or "") or "Sqrt" in (report.node or ""), report


def _overflowing_amp_steps(exhaustive: bool, in_module: bool):
    """An AMP loop whose float16 forward overflows: the loss is non-finite, the scaler skips every step."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 1)
    with torch.no_grad():
        lin.weight.fill_(30.0)
    opt = torch.optim.SGD(lin.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.full((4, 8), 300.0), torch.ones(4, 1)
    losses = []
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(2):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                if in_module:
                    out = lin(x)  # AMP: module
                else:
                    out = x @ lin.weight.T  # AMP: matmul
                loss = F.mse_loss(out.float(), y)
            losses.append(loss.item())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    return d.report, losses, scaler.get_scale(), lin.weight


@pytest.mark.parametrize("in_module", (True, False), ids=("module", "top-level"))
@pytest.mark.parametrize("exhaustive", MODES)
def test_a_forward_overflow_the_scaler_skips_is_found_at_its_line_and_not_told_to_use_autocast(exhaustive,
                                                                                               in_module):
    report, losses, scale, weight = _overflowing_amp_steps(exhaustive, in_module)
    assert not any(map(math.isfinite, losses)) and scale < 65536.0 and bool(torch.isfinite(weight).all())
    assert report is not None
    marker = "# AMP: module" if in_module else "# AMP: matmul"
    line = next(n for n, text in enumerate(open(__file__, encoding="utf-8"), 1) if text.rstrip().endswith(marker))
    assert (report.phase, report.kind, report.line) == ("forward", "inf", line), report.format(color=False)
    assert report.op in ("aten.addmm.default", "aten.mm.default")
    assert "65504" in report.explanation and "loss scaler" in report.explanation
    # the program already runs under torch.autocast with a GradScaler: that cannot be the fix
    assert "use torch.autocast" not in report.suggestion and "enabled=False" in report.suggestion
