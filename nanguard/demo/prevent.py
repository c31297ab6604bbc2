"""Demo section 1, prevent: each seed story's NaN, then the safe op's finite answer."""

from __future__ import annotations

import importlib
from typing import List

import torch

import nanguard as ng
import nanguard.stories


def _fmt(t: torch.Tensor) -> str:
    values = (t.detach().reshape(-1) + 0.0).tolist()  # + 0.0 prints -0.0 as 0
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


def _train(distance, steps: int) -> List[float]:
    torch.manual_seed(0)
    pred = torch.randn(10, 3, requires_grad=True)
    true = torch.randn(10, 3)
    optimizer = torch.optim.Adam([pred])
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(distance(pred), distance(true))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def run(show) -> None:
    show.title("Prevent: safe ops with finite values and correct gradients")

    show.story("log(1 + exp(x)) overflows; hiding the inf with torch.where still gives a NaN gradient")
    x = torch.tensor([0.0, 1.0, 100.0], requires_grad=True)
    exp = x.exp()
    naive = x.where(torch.isinf(exp), exp.log1p())
    naive.sum().backward()
    show.code("exp = x.exp(); y = x.where(torch.isinf(exp), exp.log1p())")
    show.bad("value", _fmt(naive))
    show.bad("gradient", _fmt(x.grad))
    x.grad = None
    y = ng.softplus(x)
    y.sum().backward()
    show.code("y = nanguard.softplus(x)")
    show.good("value", _fmt(y))
    show.good("gradient", _fmt(x.grad) + "  (= sigmoid(x))")

    show.story("a distance matrix via sqrt(Gram expansion): zeros on the diagonal, NaN after one step")
    story = nanguard.stories.get("distance_matrix")
    seed = importlib.import_module(story.module("nan")).compute_distance_matrix  # Gram expansion, sqrt
    naive_losses = _train(seed, 3)
    n = story.line("torch.sqrt(")
    show.code(f"{story.source().splitlines()[n - 1].strip()}   # {story.path().name}:{n}")
    show.code("Adam on MSE(D(pred), D(true))")
    show.bad("loss per step", ", ".join(f"{v:.4f}" for v in naive_losses))
    safe_losses = _train(ng.distance_matrix, 500)
    show.code("nanguard.distance_matrix(pred)")
    show.good("loss at steps 1, 100, 250, 500",
              ", ".join(f"{safe_losses[i]:.4f}" for i in (0, 99, 249, 499)) + "  (finite, decreasing)")

    show.story("cross-entropy -sum(y * log(p)) when a predicted probability is exactly 0")
    target = torch.tensor([0.0, 1.0, 0.0])
    probs = torch.tensor([0.0, 0.8, 0.2], requires_grad=True)
    show.code("-(y * torch.log(p)).sum()")
    show.bad("loss", f"{-(target * torch.log(probs)).sum().item()}")
    clipped = -(target * torch.log(torch.clamp(probs, 1e-10, 1.0))).sum()
    show.note(f"clipping 'fixes' it ({clipped.item():.4f}) but biases any term at the bound and zeroes "
              "its gradient")
    loss = ng.cross_entropy_probs(target, probs)
    loss.backward()
    show.code("nanguard.cross_entropy_probs(y, p)")
    show.good("loss", f"{loss.item():.4f}  gradient {_fmt(probs.grad)}")

    show.story("entropy with a zero probability (0 * log 0)")
    p = torch.tensor([0.1, 0.2, 0.0, 0.7], requires_grad=True)
    show.bad("-(p * p.log()).sum()", f"{-(p * p.log()).sum().item()}")
    h = ng.entropy(p)
    h.backward()
    show.good("nanguard.entropy(p)", f"{h.item():.8f}  gradient {_fmt(p.grad)}")

    show.story("attention over a padded query: every score masked to -inf, softmax is NaN")
    scores = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    keep = torch.tensor([[True, True, False], [False, False, False]])
    naive_p = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    show.bad("torch.softmax(scores.masked_fill(~keep, -inf))", _fmt(naive_p))
    safe_p = ng.softmax(scores, -1, mask=keep)
    (safe_p * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    show.good("nanguard.softmax(scores, -1, mask=keep)", _fmt(safe_p) + f"  gradient {_fmt(scores.grad)}")

    show.story("the double-where recipe, packaged: f(x) = 1/x with 0 at x = 0")
    x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    (g_naive,) = torch.autograd.grad(torch.where(x != 0, 1 / x, torch.zeros_like(x)).sum(), x)
    show.bad("torch.where(x != 0, 1 / x, 0) gradient", _fmt(g_naive))
    ng.safe_where(x != 0, lambda v: 1 / v, x).sum().backward()
    show.good("nanguard.safe_where(x != 0, lambda v: 1 / v, x) gradient", _fmt(x.grad))

    show.story("mean pooling over an empty (all padding) sequence divides by 0")
    embedded = torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]], requires_grad=True)
    tokens = torch.tensor([[3, 0], [0, 0]])
    keep = (tokens != 0).unsqueeze(-1)
    naive_mean = (embedded * keep).sum(1) / keep.sum(1)
    show.bad("(x * keep).sum(1) / keep.sum(1)", _fmt(naive_mean))
    pooled = ng.masked_mean(embedded, keep, dim=1)
    pooled.sum().backward()
    show.good("nanguard.masked_mean(x, keep, dim=1)", _fmt(pooled) + f"  gradient {_fmt(embedded.grad)}")
