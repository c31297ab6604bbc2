"""GradNormMonitor(headroom=True): float16/bfloat16 activations and gradients approaching the
dtype's maximum are warned about at least a step before they overflow, and healthy runs
(transformers' GPT-2 and BERT in float16 and bfloat16) stay quiet (issue 30)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import nanguard
from nanguard.torch.guard import HeadroomAlert, HeadroomWarning
from tests.torch.detector.test_readme_examples import ROOT


def mlp(half: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1))
    return model.half() if half else model


def planted(precision: str, grow: float = 1.0, lr_spike: float | None = None, loss_scale: float = 1.0,
            steps: int = 80, warn: bool = False):
    """Train the MLP in float16 (``"half"``: float16 weights; ``"autocast"``: float16 autocast)
    with a planted overflow: the middle layer's weight times `grow` after every step, or the
    learning rate set to `lr_spike` after step 30. Returns (the step of the first overflow:
    a non-finite output or a skipped step, the monitor)."""
    half = precision == "half"
    model = mlp(half)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = nanguard.GradNormMonitor(headroom=True, warn=warn)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor, max_consecutive=None)
    dtype = torch.float16 if half else torch.float32
    x, y = torch.randn(256, 16).to(dtype), torch.randn(256, 1).to(dtype)
    for step in range(1, steps + 1):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=not half):
            out = model(x)
        (loss_scale * (out.float() - y.float()).pow(2).mean()).backward()
        applied = guard.step()
        if not applied or not torch.isfinite(out).all():
            return step, monitor
        with torch.no_grad():
            model[2].weight.mul_(grow)
        if lr_spike is not None and step == 30:
            opt.param_groups[0]["lr"] = lr_spike
    return None, monitor


@pytest.mark.parametrize("precision", ["half", "autocast"])
@pytest.mark.parametrize("grow", [1.3, 2.0, 4.0])
def test_warns_before_growing_weights_overflow_float16(precision, grow):
    overflow, monitor = planted(precision, grow=grow, loss_scale=1e-4)
    assert overflow is not None
    alerts = monitor.headroom_alerts
    assert alerts, "no headroom warning before the overflow"
    assert alerts[0].step <= overflow - 1
    assert alerts[0].dtype == "float16" and alerts[0].bits < 9
    assert [a.step for a in alerts] == [alerts[0].step]     # one warning per episode


@pytest.mark.parametrize("precision", ["half", "autocast"])
@pytest.mark.parametrize("spike", [3.0, 10.0])
def test_warns_before_a_learning_rate_spike_overflows_float16(precision, spike):
    overflow, monitor = planted(precision, lr_spike=spike)
    assert overflow is not None and overflow > 31
    alerts = monitor.headroom_alerts
    assert alerts and 30 < alerts[0].step <= overflow - 1
    assert alerts[0].reason in ("trend", "jump") and alerts[0].rate > 0 and alerts[0].steps_left is not None


@pytest.mark.parametrize("autocast", [torch.float16, torch.bfloat16])
def test_float16_autocast_judges_float32_parameter_gradients_against_float16(autocast):
    """Under float16 autocast the weight gradients come out of float16 matmuls (then are cast
    to the float32 .grad): they are judged against float16's range; under bfloat16 (float32's
    range) they are not watched."""
    from tests.torch.guard.test_guard_monitor import regression
    monitor = nanguard.GradNormMonitor(window=50, factor=10, headroom=True, warn=False)
    regression(10, {}, monitor, autocast=autocast)
    params = {k for k in monitor.headroom._series if k[0] == "parameter gradient"}
    if autocast == torch.float16:
        assert params == {("parameter gradient", m, "torch.float16") for m in ("embed", "body", "head")}
    else:
        assert params == set()


def test_the_warning_says_where_and_how_close():
    with pytest.warns(HeadroomWarning) as caught:
        overflow, monitor = planted("half", grow=2.0, loss_scale=1e-4, warn=True)
    alert = caught[0].message.alert
    assert isinstance(alert, HeadroomAlert) and alert is monitor.headroom_alerts[0]
    message = str(caught[0].message)
    assert message.startswith(f"nanguard: float16 headroom is running out (step {alert.step})")
    assert f"`{alert.module}`" in message and "below float16's max 65504" in message
    assert alert.to_dict()["kind"] == alert.kind
    assert alert.peak == pytest.approx(65504 / 2 ** alert.bits)


def _hf(name: str):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=100))
    return transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100,
        max_position_embeddings=32))


@pytest.mark.parametrize("precision", ["float16-autocast", "bfloat16-autocast", "float16-weights"])
@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_quiet_on_healthy_hf_models(name, precision):
    model = _hf(name)
    half = precision == "float16-weights"
    if half:
        model = model.half()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4 if half else 1e-8)
    monitor = nanguard.GradNormMonitor(window=20, headroom=True)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor, max_consecutive=None)
    g = torch.Generator().manual_seed(1)
    dtype = torch.bfloat16 if precision.startswith("bfloat16") else torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeadroomWarning)
        for _ in range(30):
            ids = torch.randint(0, 100, (8, 16), generator=g)
            mask = torch.ones(8, 16, dtype=torch.long)
            mask[:, 12:] = 0                                  # padding: masks at finfo.min inside
            opt.zero_grad()
            with torch.autocast("cpu", dtype=dtype, enabled=not half):
                loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
            loss.backward()
            assert guard.step()
    assert monitor.headroom_alerts == []
    kinds = {k[0] for k in monitor.headroom._series}
    assert "activation" in kinds and "gradient" in kinds      # it was watching
    if half:
        assert "parameter gradient" in kinds


@pytest.mark.parametrize("precision,plant,value", [("float16-weights", "grow", 2.0), ("float16-autocast", "grow", 1.5),
                                                    ("float16-autocast", "lr", 1.0)])
def test_warns_before_a_planted_float16_overflow_in_gpt2(precision, plant, value):
    """GPT-2 with an MLP weight growing `value`x a step, or AdamW's learning rate set to 1.0 at
    step 10: the first warning comes at least a step before the overflow."""
    model = _hf("gpt2")
    half = precision == "float16-weights"
    if half:
        model = model.half()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4 if half else 1e-8)
    monitor = nanguard.GradNormMonitor(window=20, headroom=True, warn=False)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor, max_consecutive=None)
    g = torch.Generator().manual_seed(1)
    overflow = None
    for step in range(1, 60):
        ids = torch.randint(0, 100, (8, 16), generator=g)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=not half):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        if not guard.step() or not torch.isfinite(out.logits).all():
            overflow = step
            break
        if plant == "grow":
            with torch.no_grad():
                model.transformer.h[0].mlp.c_proj.weight.mul_(value)
        elif step == 10:
            for group in opt.param_groups:
                group["lr"] = value
    assert overflow is not None
    alerts = monitor.headroom_alerts
    assert alerts and alerts[0].step <= overflow - 1
    assert alerts[0].module.startswith("transformer.h.")


class Masked(torch.nn.Module):
    """Returns a float16 mask filled with finfo.min, and a value `level` bits below the max."""

    def __init__(self, level: float) -> None:
        super().__init__()
        self.level = level
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        mask = torch.full((4, 4), torch.finfo(torch.float16).min, dtype=torch.float16)
        return self.lin(x), mask, torch.tensor([65504 / 2 ** self.level], dtype=torch.float16)


@pytest.mark.parametrize("level", [1.0, 3.0])
def test_a_mask_at_the_maximum_is_not_judged_a_value_near_it_is(level):
    model = torch.nn.Sequential(Masked(level))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    monitor = nanguard.GradNormMonitor(headroom=True, warn=False)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor)
    for _ in range(5):
        opt.zero_grad()
        model(torch.randn(2, 4))[0].sum().backward()
        guard.step()
    alerts = monitor.headroom_alerts
    if level < 2:
        assert [(a.step, a.reason, a.module) for a in alerts] == [(1, "near", "0")]
        assert alerts[0].bits == pytest.approx(1.0, abs=0.01)
    else:
        assert alerts == []


def test_gradients_are_not_judged_under_an_active_grad_scaler():
    model = mlp(half=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24)
    monitor = nanguard.GradNormMonitor(headroom=True, warn=False)
    guard = nanguard.GradGuard(opt, model=model, scaler=scaler, monitor=monitor, max_consecutive=None)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    for _ in range(6):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
        scaler.scale((out.float() - y).pow(2).mean()).backward()
        guard.step()
        scaler.update()
    kinds = {k[0] for k in monitor.headroom._series}
    assert kinds == {"activation"}                 # the scaled gradients are the scaler's business
    assert monitor.headroom_alerts == []


def test_off_by_default_float32_is_not_watched_and_arguments_are_checked():
    model = mlp(half=False)
    nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model, monitor=True)
    assert all(not m._forward_hooks for m in model.modules())
    monitor = nanguard.GradNormMonitor(headroom=True)
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model, monitor=monitor)
    assert sum(bool(m._forward_hooks) for m in model.modules()) == 6   # the model, 3 Linear, 2 ReLU
    model(torch.randn(3, 16)).sum().backward()
    guard.step()
    assert monitor.headroom._series == {}          # float32: nothing to watch,
    assert all(not m._forward_hooks for m in model.modules())   # and the hooks are gone
    for bad in (-1, 0, 20, "yes"):
        with pytest.raises(ValueError, match="headroom"):
            nanguard.GradNormMonitor(headroom=bad)
    with pytest.raises(ValueError, match="model="):
        nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1),
                           monitor=nanguard.GradNormMonitor(headroom=True))


class ToFloat(torch.nn.Module):
    def forward(self, x):
        return x.float()


def test_only_modules_returning_float32_are_unhooked_after_the_first_step():
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), ToFloat(), torch.nn.Linear(8, 1))
    monitor = nanguard.GradNormMonitor(headroom=True, warn=False)
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model, monitor=monitor)
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(torch.randn(3, 16))
        out.float().sum().backward()
        guard.step()
    assert [bool(m._forward_hooks) for m in model] == [True, False, True]
    assert {k[1] for k in monitor.headroom._series if k[0] == "activation"} == {"0", "2", "(model)"}


def test_hooks_left_on_live_tensors_fall_silent_after_remove():
    model = mlp(half=False)
    monitor = nanguard.GradNormMonitor(headroom=True)
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model, monitor=monitor)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(3, 16))
    monitor.headroom.remove()                      # before the backward of a watched output
    assert all(not m._forward_hooks for m in model.modules())
    out.float().sum().backward()
    guard.step()
    assert monitor.headroom._seen == {} and monitor.headroom._series == {}


def test_hooks_step_aside_inside_torch_compile():
    """The hooks return at once while dynamo traces: no graph break (fullgraph=True compiles).
    aot_eager: the tracing, not inductor's kernels, is what is tested here."""
    model = mlp(half=False)
    monitor = nanguard.GradNormMonitor(headroom=True, warn=False)
    nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model, monitor=monitor)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled(torch.randn(3, 16)).float().sum().backward()
    assert monitor.headroom._seen == {}


def indented_blocks() -> list:
    """The README's fenced blocks, also those indented inside a list item, dedented."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    return [(m.group(2), textwrap.dedent(m.group(3)))
            for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```$", readme, re.S | re.M)]


def test_readme_example_prints_the_readme_warning(tmp_path):
    blocks = indented_blocks()
    i = next(i for i, (lang, text) in enumerate(blocks)
             if lang == "python" and "GradNormMonitor(headroom=True)" in text)
    code, shown = blocks[i][1], blocks[i + 1][1]
    (tmp_path / "headroom.py").write_text(code)
    done = subprocess.run([sys.executable, "headroom.py"], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=240)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    start = next(n for n, line in enumerate(lines) if "HeadroomWarning: " in line)
    got = [lines[start][lines[start].index("HeadroomWarning: "):]] + lines[start + 1:start + len(shown.splitlines())]
    assert got == shown.rstrip("\n").splitlines()


def test_fsdp2_sharded_parameter_gradients_are_judged_by_their_local_shard(tmp_path):
    """FSDP2 (one gloo process): DTensor gradients are read through their local shard."""
    dist = pytest.importorskip("torch.distributed")
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if dist.is_initialized():
        pytest.skip("a process group is already initialised")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = mlp(half=False)
        fsdp.fully_shard(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        monitor = nanguard.GradNormMonitor(headroom=True, warn=False)
        guard = nanguard.GradGuard(opt, model=model, monitor=monitor)
        for _ in range(3):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(torch.randn(8, 16))
            out.float().sum().backward()
            assert guard.step()
        assert {k[1] for k in monitor.headroom._series if k[0] == "parameter gradient"} == {"0", "2", "4"}
    finally:
        dist.destroy_process_group()
