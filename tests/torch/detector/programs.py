"""A catalogue of small buggy programs, one per kind of NaN/Inf the detector must find.

Each program marks the line the report must point at with a ``# BUG: <name>`` comment, and
`CATALOGUE` says what the report must contain: phase, kind, aten op, autograd node, module.
The seed stories (the where + log1p(exp) gradient, the distance matrix, the cross-entropy
0·log 0, the mean over an empty sequence, the double-where reciprocal, the fully masked
softmax) are all here. A story that lives in the `nanguard.stories` corpus is not copied:
its program here runs the story's own file, `STORY_CASES` lists it, and `line_of` /
`file_of` point into that file.
"""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import torch

import nanguard.stories

INF = float("inf")
PROGRAMS_FILE = os.path.abspath(__file__)

DISTANCE_STORY = nanguard.stories.get("distance_matrix")
# Programs that run a seed story: name -> (story, text of the line the report must point at)
STORY_LINES = {"distance_matrix": (DISTANCE_STORY, "torch.sqrt(")}


def file_of(name: str) -> str:
    """The file the report for program `name` must point into."""
    if name in STORY_LINES:
        return str(STORY_LINES[name][0].path())
    return PROGRAMS_FILE


def marked_line(path: str, tag: str) -> int:
    """The one line of the file at `path` that ends with ``# HERE: tag``."""
    with open(path, encoding="utf-8") as fh:
        src = fh.read().splitlines()
    hits = [i + 1 for i, text in enumerate(src) if text.rstrip().endswith(f"# HERE: {tag}")]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times in {path}"
    return hits[0]


def line_of(name: str) -> int:
    """The line the report for program `name` must point at: for a story, the story's line;
    otherwise the line in this file carrying ``# BUG: name``."""
    if name in STORY_LINES:
        story, text = STORY_LINES[name]
        return story.line(text)
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# BUG: {name}")]
    assert len(hits) == 1, f"marker {name!r} found {len(hits)} times"
    return hits[0]


# ------------------------------------------------------------------------------------ forward
def log_of_zero():
    p = torch.tensor([0.5, 0.0, 0.5])
    return torch.log(p)  # BUG: log_of_zero


def log_of_negative():
    x = torch.tensor([1.0, -2.0])
    return x.log()  # BUG: log_of_negative


def exp_overflow():
    logits = torch.tensor([1.0, 100.0])
    return torch.exp(logits)  # BUG: exp_overflow


def zero_over_zero():
    num = torch.tensor([1.0, 0.0])
    den = torch.tensor([2.0, 0.0])
    return num / den  # BUG: zero_over_zero


def x_over_zero():
    x = torch.tensor([3.0, 1.0])
    return x / torch.zeros(2)  # BUG: x_over_zero


def sqrt_of_negative():
    a = torch.tensor([1.0, 2.0])
    d2 = a * a - (a * a + 1e-3)
    return torch.sqrt(d2)  # BUG: sqrt_of_negative


def inf_minus_inf():
    big = torch.full((3,), INF)          # a deliberate constant: not a finding by itself
    return big - big  # BUG: inf_minus_inf


def float16_overflow():
    h = torch.tensor([300.0, 2.0]).half()
    return h * h  # BUG: float16_overflow


def float16_cast_overflow():
    x = torch.tensor([1e5, 1.0])
    return x.to(torch.float16)  # BUG: float16_cast_overflow


def cross_entropy_zero_prob():
    # Seed: -sum(y * log(y_conv)) with a class probability of exactly 0 (checked for NaN only:
    # log 0 = -inf comes first otherwise).
    y = torch.tensor([0.0, 1.0, 0.0])
    y_conv = torch.tensor([0.0, 0.7, 0.3])
    return -(y * torch.log(y_conv)).sum()  # BUG: cross_entropy_zero_prob


def mean_over_empty_sequence():
    # Seed: mean pooling divides by the number of non-pad tokens, 0 for an empty sequence.
    embedded = torch.zeros(2, 4, 3)
    lengths = torch.tensor([[4.0], [0.0]])
    return embedded.sum(1) / lengths  # BUG: mean_over_empty_sequence


def fully_masked_softmax():
    scores = torch.randn(2, 3)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    masked = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(masked, dim=-1)  # BUG: fully_masked_softmax


def acos_out_of_range():
    a = torch.tensor([1.0, 0.0])
    cos = (a * 1.0000001) / 1.0
    return torch.acos(cos * 1.0001)  # BUG: acos_out_of_range


class LogLayer(torch.nn.Module):
    """A custom layer whose forward takes log of a value that can be negative."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.proj(x)
        return torch.log(h - 100.0)  # BUG: module_forward


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
        self.bad = LogLayer()
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.bad(self.encoder(x)))


def module_forward():
    torch.manual_seed(0)
    net = Net()
    return net(torch.randn(3, 4))


def linear_float16_overflow():
    lin = torch.nn.Linear(4, 4).half()
    with torch.no_grad():
        lin.weight.fill_(200.0)
    model = torch.nn.Sequential(lin)
    x = torch.full((2, 4), 100.0, dtype=torch.float16)
    return model(x)  # BUG: linear_float16_overflow


def attention_fully_masked():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 3, 8)
    pad = torch.tensor([[False, False, True], [True, True, True]])   # sample 2 is all padding
    out, _ = mha(x, x, x, key_padding_mask=pad)  # BUG: attention_fully_masked
    return out


# ----------------------------------------------------------------------------------- backward
def where_log1p_exp():
    # Seed: log(1 + exp(x)) with inf replaced by x through where(); the gradient is NaN.
    x = torch.tensor([0.0, 1.0, 100.0], requires_grad=True)
    exp = x.exp()  # BUG: where_log1p_exp
    y = x.where(torch.isinf(exp), exp.log1p())
    y.sum().backward()


def distance_matrix():
    # Seed: distance-matrix loss, NaN gradient from the zero diagonal. Two training steps of
    # the story's own program (nanguard.stories.distance_matrix_nan); it prints its losses.
    importlib.import_module(DISTANCE_STORY.module("nan")).main(steps=2)


def xlogy_at_zero():
    p = torch.tensor([0.0, 0.25, 0.75], requires_grad=True)
    entropy = -torch.xlogy(p, p).sum()  # BUG: xlogy_at_zero
    entropy.backward()


def logsumexp_all_masked():
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[0.0, 0.0, -INF], [-INF, -INF, -INF]])   # a float mask, added
    torch.logsumexp(scores + mask, dim=-1).sum().backward()  # BUG: logsumexp_all_masked


def double_where_reciprocal():
    # Seed: where(x != 0, 1/x, 0) still has a NaN gradient at 0 (checked for NaN only).
    x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    y = torch.where(x != 0, 1.0 / x, torch.zeros_like(x))  # BUG: double_where_reciprocal
    y.sum().backward()


class NormLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        h = self.proj(x) * (x.abs().sum(-1, keepdim=True) > 0)
        return torch.sqrt((h * h).sum(-1))  # BUG: module_backward


def module_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(NormLayer())
    x = torch.randn(4, 3)
    x[2] = 0.0
    model(x).sum().backward()


def pow_half_at_zero():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    (x ** 0.5).sum().backward()  # BUG: pow_half_at_zero


# ---------------------------------------------------------------------------------- input
def nan_data_into_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    batch = torch.tensor([[1.0, 2.0, 3.0], [float("nan"), 0.0, 1.0]])   # made outside the model
    return model(batch)  # BUG: nan_data_into_model


def nan_literal():
    return torch.tensor([1.0, float("nan")]) * 2  # BUG: nan_literal


@dataclass
class Case:
    name: str
    fn: Callable[[], object]
    phase: str
    kind: str
    op: str
    node: Optional[str] = None
    module: Optional[str] = None
    check: str = "both"
    extra: Dict[str, object] = field(default_factory=dict)

    @property
    def line(self) -> int:
        return line_of(self.name)

    @property
    def file(self) -> str:
        return file_of(self.name)


CATALOGUE = [
    Case("log_of_zero", log_of_zero, "forward", "inf", "aten.log.default"),
    Case("log_of_negative", log_of_negative, "forward", "nan", "aten.log.default"),
    Case("exp_overflow", exp_overflow, "forward", "inf", "aten.exp.default"),
    Case("zero_over_zero", zero_over_zero, "forward", "nan", "aten.div.Tensor"),
    Case("x_over_zero", x_over_zero, "forward", "inf", "aten.div.Tensor"),
    Case("sqrt_of_negative", sqrt_of_negative, "forward", "nan", "aten.sqrt.default"),
    Case("inf_minus_inf", inf_minus_inf, "forward", "nan", "aten.sub.Tensor"),
    Case("float16_overflow", float16_overflow, "forward", "inf", "aten.mul.Tensor"),
    Case("float16_cast_overflow", float16_cast_overflow, "forward", "inf", "aten._to_copy.default"),
    Case("cross_entropy_zero_prob", cross_entropy_zero_prob, "forward", "nan", "aten.mul.Tensor", check="nan"),
    Case("mean_over_empty_sequence", mean_over_empty_sequence, "forward", "nan", "aten.div.Tensor"),
    Case("fully_masked_softmax", fully_masked_softmax, "forward", "nan", "aten._softmax.default"),
    Case("acos_out_of_range", acos_out_of_range, "forward", "nan", "aten.acos.default"),
    Case("module_forward", module_forward, "forward", "nan", "aten.log.default", module="net.bad"),
    Case("linear_float16_overflow", linear_float16_overflow, "forward", "inf", "aten.addmm.default",
         module="model.0"),
    Case("attention_fully_masked", attention_fully_masked, "forward", "nan", "aten._softmax.default",
         module="mha"),
    Case("where_log1p_exp", where_log1p_exp, "backward", "nan", "aten.mul.Tensor", node="ExpBackward0",
         check="nan"),
    Case("xlogy_at_zero", xlogy_at_zero, "backward", "nan", "aten.div.Tensor", node="XlogyBackward0"),
    Case("logsumexp_all_masked", logsumexp_all_masked, "backward", "nan", "aten.sub.Tensor",
         node="LogsumexpBackward0"),
    Case("double_where_reciprocal", double_where_reciprocal, "backward", "nan", "aten.mul.Tensor",
         node="ReciprocalBackward0", check="nan"),
    Case("module_backward", module_backward, "backward", "inf", "aten.div.Tensor", node="SqrtBackward0",
         module="model.0"),
    Case("pow_half_at_zero", pow_half_at_zero, "backward", "inf", "aten.pow.Tensor_Scalar", node="PowBackward0"),
    Case("nan_data_into_model", nan_data_into_model, "input", "nan", "aten.addmm.default", module="model.0"),
    Case("nan_literal", nan_literal, "input", "nan", "aten.mul.Tensor"),
]

# The programs that run a seed story from nanguard.stories (their report points into the
# story's file, not this one); checked like CATALOGUE by tests/torch/detector/test_demo.py.
STORY_CASES = [
    Case("distance_matrix", distance_matrix, "backward", "nan", "aten.div.Tensor", node="SqrtBackward0"),
]


# ------------------------------------------------------------------------------------ fixed
# Each buggy program above rewritten the way its report's `fix` line says. The detector must
# stay quiet on every one of them, in both checking modes, and the values and gradients must
# be finite (tests/torch/detector/test_fixed_programs.py). A program that is its own bug
# (a NaN literal, inf - inf of two infinities) has no fixed twin.
def _leaf(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype, requires_grad=True)


def log_of_zero_fixed():
    p = _leaf([0.5, 0.0, 0.5])
    entropy = -nanguard.xlogy(p, p).sum()            # the x·log(x) it was for
    entropy.backward()
    return entropy, p.grad


def log_of_negative_fixed():
    x = _leaf([1.0, -2.0])
    y = torch.log(nanguard.softplus(x))              # a positive map, then the log
    y.sum().backward()
    return y, x.grad


def exp_overflow_fixed():
    logits = _leaf([1.0, 100.0])
    lse = nanguard.logsumexp(logits, dim=0)          # log of the sum of exponentials
    lse.backward()
    return lse, logits.grad


def zero_over_zero_fixed():
    num, den = _leaf([1.0, 0.0]), _leaf([2.0, 0.0])
    q = nanguard.div(num, den)
    q.sum().backward()
    return q, num.grad, den.grad


def x_over_zero_fixed():
    x, den = _leaf([3.0, 1.0]), _leaf([0.0, 0.0])
    q = nanguard.div(x, den)
    q.sum().backward()
    return q, x.grad, den.grad


def sqrt_of_negative_fixed():
    a = _leaf([1.0, 2.0])
    d = nanguard.sqrt(a * a - (a * a + 1e-3))       # round-off negatives count as 0
    d.sum().backward()
    return d, a.grad


def float16_overflow_fixed():
    h = torch.tensor([300.0, 2.0]).half()
    return h.float() * h.float()                     # the square in float32


def float16_cast_overflow_fixed():
    x = torch.tensor([1e5, 1.0])
    return x.to(torch.bfloat16)                      # a half type with float32's range


def cross_entropy_zero_prob_fixed():
    y = torch.tensor([0.0, 1.0, 0.0])
    y_conv = _leaf([0.0, 0.7, 0.3])
    loss = nanguard.cross_entropy_probs(y, y_conv)
    loss.backward()
    return loss, y_conv.grad


def mean_over_empty_sequence_fixed():
    embedded = torch.randn(2, 4, 3, requires_grad=True)
    keep = torch.tensor([[True] * 4, [False] * 4])
    pooled = nanguard.masked_mean(embedded, keep.unsqueeze(-1), dim=1)
    pooled.sum().backward()
    return pooled, embedded.grad


def fully_masked_softmax_fixed():
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    probs = nanguard.softmax(scores, dim=-1, mask=mask)
    (probs * torch.arange(3.0)).sum().backward()
    return probs, scores.grad


def acos_out_of_range_fixed():
    a = _leaf([0.3, 0.4, 0.5])
    cos = nanguard.cosine_similarity(a, a * 3.0, dim=0)   # may round past 1
    angle = nanguard.acos(cos)
    angle.backward()
    return angle, a.grad


class LogLayerFixed(LogLayer):
    def forward(self, x):
        # the log of a positive map, kept in log space: log(exp(h - 100)) is h - 100. (Not
        # log(softplus(h - 100)): softplus there is 4e-44, and the log's gradient 1/4e-44
        # overflows float32, which the detector rightly reports.)
        return self.proj(x) - 100.0


def module_forward_fixed():
    torch.manual_seed(0)
    net = Net()
    net.bad = LogLayerFixed()
    out = net(torch.randn(3, 4))
    out.sum().backward()
    return out, *[p.grad for p in net.parameters()]


def linear_float16_overflow_fixed():
    lin = torch.nn.Linear(4, 4)
    with torch.no_grad():
        lin.weight.fill_(200.0)
    x = torch.full((2, 4), 100.0, dtype=torch.float16)
    return torch.nn.Sequential(lin)(x.float())         # the layer in float32


def attention_fully_masked_fixed():
    torch.manual_seed(0)
    q = torch.randn(2, 3, 8, requires_grad=True)
    pad = torch.tensor([[False, False, True], [True, True, True]])   # sample 2 is all padding
    scores = q @ q.mT / 8 ** 0.5
    weights = nanguard.softmax(scores, dim=-1, mask=~pad[:, None, :])
    out = weights @ q
    out.sum().backward()
    return out, q.grad


def where_log1p_exp_fixed():
    x = _leaf([0.0, 1.0, 100.0])
    y = nanguard.softplus(x)
    y.sum().backward()
    return y, x.grad


def xlogy_at_zero_fixed():
    p = _leaf([0.0, 0.25, 0.75])
    h = nanguard.entropy(p)
    h.backward()
    return h, p.grad


def logsumexp_all_masked_fixed():
    scores = torch.randn(2, 3, requires_grad=True)
    keep = torch.tensor([[True, True, False], [False, False, False]])
    lse = nanguard.logsumexp(scores, dim=-1, mask=keep)    # -inf for the empty row, gradient 0
    loss = torch.where(keep.any(-1), lse, 0.0).sum()
    loss.backward()
    return loss, scores.grad


def double_where_reciprocal_fixed():
    x = _leaf([-1.0, 0.0, 1.0])
    y = nanguard.safe_where(x != 0, torch.reciprocal, x)
    y.sum().backward()
    return y, x.grad


class NormLayerFixed(NormLayer):
    def forward(self, x):
        h = self.proj(x) * (x.abs().sum(-1, keepdim=True) > 0)
        return nanguard.norm(h, dim=-1)


def module_backward_fixed():
    torch.manual_seed(0)
    model = torch.nn.Sequential(NormLayerFixed())
    x = torch.randn(4, 3)
    x[2] = 0.0
    out = model(x)
    out.sum().backward()
    return out, *[p.grad for p in model.parameters()]


def pow_half_at_zero_fixed():
    x = _leaf([0.0, 4.0])
    y = nanguard.pow(x, 0.5)
    y.sum().backward()
    return y, x.grad


def nan_data_into_model_fixed():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    batch = torch.tensor([[1.0, 2.0, 3.0], [float("nan"), 0.0, 1.0]])
    batch = batch[~torch.isnan(batch).any(-1)]                  # drop the bad row where it is loaded
    out = model(batch)
    out.sum().backward()
    return out, *[p.grad for p in model.parameters()]


def distance_matrix_fixed():
    return importlib.import_module(DISTANCE_STORY.module("fixed")).main(steps=3)


FIXED = {
    name: globals()[f"{name}_fixed"]
    for name in [c.name for c in CATALOGUE + STORY_CASES] if f"{name}_fixed" in globals()
}
