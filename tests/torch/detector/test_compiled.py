"""Code compiled with torch.compile (inductor) *before* detect(): a NaN made inside it, in the
forward or in the compiled backward, is located at the user's line by an eager replay; what
the replay cannot see (the kernels computing differently from eager) is said in a note."""

from __future__ import annotations

import types

import pytest
import torch

import nanguard
from tests.torch.detector.programs import marked_line

pytestmark = pytest.mark.slow
MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


def _line(tag: str) -> int:
    return marked_line(__file__, tag)


class Points(torch.nn.Module):
    """Embeds points and averages their pairwise distances: sqrt at 0 on the diagonal."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 8)

    def forward(self, x):
        h = self.proj(x)
        d = ((h[:, None, :] - h[None, :, :]) ** 2).sum(-1).sqrt()  # HERE: pairwise_sqrt
        return d.mean()


@pytest.fixture(scope="module")
def points():
    torch.manual_seed(0)
    model = Points()
    compiled = torch.compile(model)                  # inductor
    x = torch.randn(6, 3)
    compiled(x).backward()                           # compiled (and run) outside detection
    assert model.proj.weight.grad.isnan().all()      # the compiled backward makes the NaN
    return model, compiled, x


@pytest.mark.parametrize("exhaustive", MODES)
def test_nan_in_the_backward_of_a_compiled_model_is_located_at_its_line(points, exhaustive):
    model, compiled, x = points
    model.zero_grad()
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        loss = compiled(x)
        if not exhaustive:   # the default mode leaves the compiled kernels running
            assert loss.grad_fn.name() == "CompiledFunctionBackward"
        loss.backward()  # HERE: points_backward
    r = d.report
    assert r is not None
    assert (r.phase, r.node, r.op, r.kind) == ("backward", "SqrtBackward0", "aten.div.Tensor", "inf")
    assert (r.line, r.call_line) == (_line("pairwise_sqrt"), _line("points_backward"))
    assert r.module == "compiled"
    if not exhaustive:
        assert "replayed the forward and backward" in r.how
        assert any("`compiled` ran compiled" in n and "replayed eagerly" in n for n in r.notes), r.notes
    assert model.proj.weight.grad.isnan().all()      # the program ran as it would have
    # the replay (and exhaustive mode) ran the model eagerly under a dispatch mode, which
    # TorchDynamo would take as a reason to skip its code for good: it is still compiled
    assert compiled(x).grad_fn.name() == "CompiledFunctionBackward"


def test_healthy_compiled_model_is_quiet_and_stays_compiled():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    compiled = torch.compile(model)
    x = torch.randn(5, 4)
    compiled(x).sum().backward()
    with nanguard.detect() as d:
        out = compiled(x)
        assert out.grad_fn.name() == "CompiledFunctionBackward"
        out.sum().backward()
    assert d.report is None


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_compiled_function_at_top_level_is_checked_eagerly_and_stays_compiled(exhaustive):
    torch.manual_seed(0)
    w = torch.nn.Linear(3, 1)

    def loss_fn(v):
        return torch.sqrt(w(v) * 0).sum()  # HERE: top_level_sqrt

    compiled = torch.compile(loss_fn)
    v = torch.randn(2, 3, requires_grad=True)
    assert compiled(v).grad_fn.name() == "CompiledFunctionBackward"
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        compiled(v).backward()
    assert (d.report.phase, d.report.node, d.report.line) == ("backward", "SqrtBackward0", _line("top_level_sqrt"))
    assert compiled(v).grad_fn.name() == "CompiledFunctionBackward"


def pairwise(h):
    return ((h[:, None, :] - h[None, :, :]) ** 2).sum(-1).sqrt()  # HERE: compiled_function_sqrt


compiled_pairwise = torch.compile(pairwise)


class UsesACompiledFunction(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 8)

    def forward(self, x):
        return compiled_pairwise(self.proj(x)).mean()


def test_a_compiled_function_inside_a_plain_module_runs_compiled_and_is_replayed():
    torch.manual_seed(0)
    model = UsesACompiledFunction()
    x = torch.randn(6, 3)
    model(x).backward()
    assert model.proj.weight.grad.isnan().all()
    with nanguard.detect(mode="record") as d:
        loss = model(x)
        assert loss.grad_fn.next_functions[0][0].name() == "CompiledFunctionBackward"
        loss.backward()
    r = d.report
    assert (r.phase, r.node, r.line) == ("backward", "SqrtBackward0", _line("compiled_function_sqrt"))
    assert any("1 compiled region (CompiledFunctionBackward) ran compiled" in n for n in r.notes), r.notes


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.points = Points()

    def forward(self, x):
        return self.points(x) * 2


def test_compiled_submodule_and_module_compile_in_place():
    """A compiled submodule of a plain model, and ``module.compile()``: both replayed eagerly."""
    torch.manual_seed(0)
    outer = torch.nn.Sequential(Block())
    outer[0].points = torch.compile(outer[0].points)
    x = torch.randn(6, 3)
    outer(x).backward()
    with nanguard.detect(mode="record") as d:
        outer(x).backward()
    r = d.report
    assert (r.phase, r.node, r.line) == ("backward", "SqrtBackward0", _line("pairwise_sqrt"))
    assert any("`outer.0.points` ran compiled" in n for n in r.notes), r.notes

    in_place = Points()
    in_place.compile()
    in_place(x).backward()
    with nanguard.detect(mode="record") as d:
        in_place(x).backward()
    r = d.report
    assert (r.phase, r.node, r.line) == ("backward", "SqrtBackward0", _line("pairwise_sqrt"))
    assert any("`in_place` ran compiled" in n for n in r.notes), r.notes
    assert in_place(x).grad_fn.name() == "CompiledFunctionBackward"


def _poisoned_backend():
    """aot_autograd whose compiled backward returns NaN: a non-finite value that only the
    compiled code makes (as a kernel that computes differently from eager would)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def poison_bw(gm, example_inputs):
        def run(args):
            return [o * float("nan") if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                    for o in gm(*args)]
        run._boxed_call = True
        return run

    return aot_autograd(fw_compiler=lambda gm, ex: make_boxed_func(gm), bw_compiler=poison_bw)


def test_a_nan_only_the_compiled_kernels_make_is_reported_as_such():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    compiled = torch.compile(model, backend=_poisoned_backend())
    x = torch.randn(5, 3)
    with nanguard.detect(mode="record") as d:
        compiled(x).sum().backward()  # HERE: poisoned_backward
    r = d.report
    assert (r.phase, r.kind, r.call_line) == ("backward", "nan", _line("poisoned_backward"))
    assert "the replay did not reproduce the non-finite value" in r.notes
    assert any("`compiled` ran compiled" in n and "eager replay of its backward did not make this value" in n
               and "aot_eager" in n for n in r.notes), r.notes


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_value_only_the_compiled_forward_makes_is_reported_not_taken_for_a_mask(value):
    """An infinity in a compiled module's output that its eager replay does not make is not
    taken for a deliberate one (a -inf mask): the kernels made it, so it is reported."""
    def poison(gm, example_inputs):
        def run(*args):
            out = gm(*args)
            return tuple(o * value for o in out) if isinstance(out, (tuple, list)) else out * value
        return run

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    compiled = torch.compile(model, backend=poison)
    with nanguard.detect(mode="record") as d, torch.no_grad():
        compiled(torch.randn(5, 3))  # HERE: poisoned_forward
    r = d.report
    assert r is not None
    assert (r.phase, r.kind, r.line) == ("forward", "inf" if value == float("inf") else "nan",
                                         _line("poisoned_forward"))
    assert any("`compiled` ran compiled" in n and "eager replay of its forward did not make this value" in n
               for n in r.notes), r.notes


class Plant(torch.nn.Module):
    """Planted after a GPT-2 MLP: a distance matrix over the tokens (sqrt at 0 when ``eps``
    is 0: a NaN in the backward) and a log of ``gate`` (log 0 = -inf in the forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("gate", torch.ones(()))
        self.register_buffer("eps", torch.full((), 1e-6))

    def forward(self, h):
        d = ((h[:, :, None, :] - h[:, None, :, :]) ** 2).sum(-1).add(self.eps).sqrt()  # HERE: gpt2_sqrt
        return h + torch.log(self.gate) + 1e-3 * d.mean(-1, keepdim=True)  # HERE: gpt2_log


def test_hf_gpt2_compiled_with_inductor():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=100,
                                  attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    mlp = model.transformer.h[1].mlp
    mlp.plant = plant = Plant()
    forward = type(mlp).forward
    mlp.forward = types.MethodType(lambda self, h: self.plant(forward(self, h)), mlp)
    gpt2 = torch.compile(model)
    ids = torch.randint(0, 100, (2, 12))
    gpt2(input_ids=ids, labels=ids).loss.backward()     # compiled outside detection

    def step():
        model.zero_grad()
        with nanguard.detect(mode="record") as d:
            out = gpt2(input_ids=ids, labels=ids)
            assert out.loss.grad_fn.name() == "CompiledFunctionBackward"
            out.loss.backward()
        return d.report

    assert step() is None                                # healthy: quiet
    plant.eps.zero_()
    r = step()
    assert (r.phase, r.node, r.line) == ("backward", "SqrtBackward0", _line("gpt2_sqrt"))
    assert r.module == "gpt2.transformer.h.1.mlp.plant"
    assert any("`gpt2` ran compiled" in n for n in r.notes), r.notes
    plant.eps.fill_(1e-6)
    plant.gate.zero_()
    r = step()
    assert (r.phase, r.op, r.kind, r.line) == ("forward", "aten.log.default", "inf", _line("gpt2_log"))
    assert r.module == "gpt2.transformer.h.1.mlp.plant"
    assert any("`gpt2` is compiled" in n and "replayed eagerly" in n for n in r.notes), r.notes
    assert gpt2(input_ids=ids, labels=ids).loss.grad_fn.name() == "CompiledFunctionBackward"
