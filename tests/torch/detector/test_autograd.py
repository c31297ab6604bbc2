"""Autograd situations: no_grad / inference_mode, double backward, accumulation, autograd.grad,
threads, torch.compile, and a NaN made by the optimizer step."""

from __future__ import annotations

import threading

import pytest
import torch

import nanguard
from tests.torch.detector import programs
from tests.torch.detector.programs import line_of, marked_line

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


def _line(tag: str) -> int:
    return marked_line(__file__, tag)


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_no_grad_and_inference_mode(exhaustive, grad_mode):
    ctx = torch.no_grad if grad_mode == "no_grad" else torch.inference_mode
    torch.manual_seed(0)
    net = programs.Net()
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d, ctx():
        net(torch.randn(2, 4))
    assert (d.report.phase, d.report.op, d.report.module) == ("forward", "aten.log.default", "net.bad")
    assert d.report.line == line_of("module_forward")
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d, ctx():
        torch.zeros(2).log()  # HERE: top_level_no_grad
    assert d.report.line == _line("top_level_no_grad")


@pytest.mark.parametrize("exhaustive", MODES)
def test_double_backward_gradient_penalty(exhaustive):
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 1, requires_grad=True)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        out = (x @ w).pow(2).sum() * 0.0 + (x[:, :1] * 0).sum()      # d out / dx has zero rows
        (g,) = torch.autograd.grad(out, x, create_graph=True)
        penalty = torch.sqrt((g * g).sum(-1)).mean()  # HERE: penalty
        penalty.backward()
    r = d.report
    assert (r.phase, r.node, r.line) == ("backward", "SqrtBackward0", _line("penalty"))


@pytest.mark.parametrize("exhaustive", MODES)
def test_nan_in_first_order_grad_with_create_graph(exhaustive):
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        y = torch.sqrt(x).sum()  # HERE: first_order
        (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert (d.report.phase, d.report.node, d.report.line) == ("backward", "SqrtBackward0", _line("first_order"))


@pytest.mark.parametrize("exhaustive", MODES)
def test_gradient_accumulation_over_microbatches(exhaustive):
    torch.manual_seed(0)
    model = torch.nn.Sequential(programs.NormLayer())
    batches = [torch.randn(4, 3) for _ in range(3)]
    batches[2][1] = 0.0                        # only the third micro-batch has a zero row
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for i, b in enumerate(batches):
            model(b).sum().backward()
            if d.report is not None:
                break
    assert i == 2
    assert (d.report.phase, d.report.node, d.report.module) == ("backward", "SqrtBackward0", "model.0")
    assert d.report.line == line_of("module_backward")


def test_clean_accumulation_gives_the_same_gradients():
    def run(detect: bool):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
        ctx = nanguard.detect() if detect else torch.enable_grad()
        with ctx:
            for _ in range(3):
                model(torch.randn(4, 3)).pow(2).mean().backward()
        return [p.grad.clone() for p in model.parameters()]
    for a, b in zip(run(False), run(True)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("exhaustive", MODES)
def test_autograd_grad_without_dot_grad(exhaustive):
    x = torch.tensor([0.0, 2.0], requires_grad=True)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        y = (x ** 0.5).sum()  # HERE: functional_grad
        torch.autograd.grad(y, [x])
    assert (d.report.phase, d.report.node, d.report.line) == ("backward", "PowBackward0", _line("functional_grad"))
    assert x.grad is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_retain_graph_twice(exhaustive):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with nanguard.detect(exhaustive=exhaustive) as d:
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
    assert d.report is None and torch.equal(x.grad, torch.tensor([4.0, 8.0]))


def test_threads_are_independent():
    results = {}
    barrier = threading.Barrier(2)

    def worker(name, bad):
        d = nanguard.detect(mode="record")
        with d:
            barrier.wait()
            for _ in range(20):
                x = torch.tensor([0.0 if bad else 1.0], requires_grad=True)
                torch.sqrt(x).sum().backward()
        results[name] = d.report

    threads = [threading.Thread(target=worker, args=("bad", True)),
               threading.Thread(target=worker, args=("good", False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["good"] is None
    assert results["bad"] is not None and results["bad"].node == "SqrtBackward0"


def test_shared_decorator_across_threads():
    @nanguard.detect()
    def step(v):
        return torch.log(torch.tensor([v]))

    errors = []

    def worker(v):
        try:
            step(v)
        except nanguard.NonFiniteError as e:
            errors.append(e.report.op)

    threads = [threading.Thread(target=worker, args=(v,)) for v in (0.0, 1.0, 0.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == ["aten.log.default", "aten.log.default"]


def test_main_thread_detection_does_not_touch_other_threads():
    out = {}

    def other():
        out["y"] = torch.log(torch.zeros(1))    # another thread, no detection: no error

    with nanguard.detect():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert torch.isinf(out["y"]).all()


@pytest.mark.parametrize("exhaustive", MODES)
def test_optimizer_step_that_makes_nan(exhaustive):
    """Adam with eps=0 divides 0/0 for a weight whose gradient has always been 0."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=0.0)
    x = torch.randn(4, 3)
    x[:, 2] = 0.0                                 # the third input is always 0: its weight's grad is 0
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(2):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()  # HERE: optimizer_step
    r = d.report
    assert (r.phase, r.kind, r.step) == ("optimizer", "nan", 1)
    assert r.line == _line("optimizer_step")
    assert "eps=0" in r.explanation and "eps > 0" in r.suggestion
    if exhaustive:
        assert r.op == "aten.addcdiv_.default"      # the exact op inside the step (exp_avg / denom)
        assert "1 of 3 denominators are 0" in r.explanation
    else:
        assert r.op == "Adam.step"                  # found by the check of the parameters after the step
        assert any("0.weight held nan" in n.lower() for n in r.notes)
        assert [s.name for s in r.outputs] == ["model.0.weight"] and r.outputs[0].nan == 1


@pytest.mark.slow
@pytest.mark.parametrize("exhaustive", MODES)
def test_torch_compile(exhaustive):
    """Compiled code runs eagerly while detection is active (PyTorch does not compile under a
    dispatch mode); code compiled before is replayed eagerly. Either way the op is found."""
    torch.manual_seed(0)
    net = programs.Net()
    compiled = torch.compile(net)
    x = torch.randn(2, 4)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        compiled(x)
    assert (d.report.op, d.report.line) == ("aten.log.default", line_of("module_forward"))
    assert d.report.module == "compiled.bad"

    w = torch.nn.Linear(3, 1)
    cw = torch.compile(w)

    def loss_fn(v):
        return torch.sqrt(cw(v) * 0).sum()  # HERE: compiled_backward

    cf = torch.compile(loss_fn)
    v = torch.randn(2, 3, requires_grad=True)
    cf(v).backward()                           # compiled outside detection first
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        cf(v).backward()
    assert (d.report.phase, d.report.node, d.report.line) == ("backward", "SqrtBackward0", _line("compiled_backward"))


@pytest.mark.parametrize("exhaustive", MODES)
def test_autocast_regions_are_replayed_under_autocast(exhaustive):
    torch.manual_seed(0)
    model = torch.nn.Sequential(programs.NormLayer())
    x = torch.randn(4, 3)
    x[1] = 0.0
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        out.float().sum().backward()
    r = d.report
    assert (r.phase, r.node, r.module, r.line) == ("backward", "SqrtBackward0", "model.0", line_of("module_backward"))
    assert r.forward_inputs[0].dtype == "bfloat16"        # the forward ran in bfloat16, as recorded
