"""Forward + backward time of every safe op against its unsafe native counterpart.

Same run, interleaved rounds (see common.py), 1e6 elements, float32, CPU, one thread.
For each op three cases are timed:

* native  - the torch op a user would write (NaN/inf gradients at the singular points),
* nanguard - the safe op,
* composite - the safe behaviour built naively from torch ops (double-where and friends),
              to show why the ops are written as autograd Functions.

Prints a table of ratios to native, then the median and the worst ratio.

    python benchmarks/ops.py [--rounds 20] [--only sqrt,softmax] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import compare, print_table, single_thread  # noqa: E402

import nanguard as ng  # noqa: E402

N = 1_000_000
ROWS, COLS = 1000, 1000


def _fwd_bwd(fn: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
    """A closure running fn forward and backward with fresh leaves and a fixed upstream grad."""
    out = fn(*[t.detach().requires_grad_() for t in inputs])
    upstream = torch.randn(out.shape)

    def run() -> None:
        leaves = [t.detach().requires_grad_() for t in inputs]
        fn(*leaves).backward(upstream)

    return run


def _double_where(cond_fn, fn, other=0.0):
    """The textbook safe composite: where(ok, f(where(ok, x, 1)), other)."""
    def composite(x):
        ok = cond_fn(x)
        return torch.where(ok, fn(torch.where(ok, x, torch.ones_like(x))), other)
    return composite


def cases() -> Dict[str, Dict[str, object]]:
    g = torch.Generator().manual_seed(0)
    vec = torch.randn(N, generator=g) * 4
    positive = torch.rand(N, generator=g)
    positive[::100] = 0.0  # 1% exact zeros: the singular points the safe ops exist for
    mat = torch.randn(ROWS, COLS, generator=g) * 3
    mask = torch.rand(ROWS, COLS, generator=g) > 0.2
    mask[::50] = False  # 2% of rows fully masked
    probs = torch.softmax(torch.randn(ROWS, COLS, generator=g), -1)
    probs[:, ::10] = 0.0
    probs[:, 1::10] = 0.0  # probs.roll(1, 1) is then 0 wherever probs is at columns 1, 11, ...
    unit = torch.rand(N, generator=g) * 2 - 1
    points = torch.randn(ROWS, 3, generator=g)
    b = torch.randn(N, generator=g)
    b[::100] = 0.0
    neg_inf = float("-inf")

    def masked_scores(x):
        return x.masked_fill(~mask, neg_inf)

    def composite_softmax(x):
        dead = ~mask.any(-1, keepdim=True)
        return torch.where(dead, 0.0, torch.softmax(torch.where(mask & ~dead, x, neg_inf).masked_fill(dead, 0.0), -1))

    def composite_logsumexp(x):
        m = x.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        return torch.log(torch.exp(x - m).sum(-1)) + m.squeeze(-1)

    def composite_norm(x):
        sq = (x * x).sum(-1)
        ok = sq > 0
        return torch.where(ok, torch.sqrt(torch.where(ok, sq, 1.0)), 0.0)

    def composite_entropy(p):
        ok = p > 0
        return -torch.where(ok, p * torch.log(torch.where(ok, p, 1.0)), 0.0).sum(-1)

    def gram_distances(x):
        gram = x @ x.T
        d = gram.diagonal()
        sq = d[:, None] + d[None, :] - 2 * gram
        ok = sq > 0
        return torch.where(ok, torch.sqrt(torch.where(ok, sq, 1.0)), 0.0)

    def composite_div(a, bb):
        ok = bb != 0
        return torch.where(ok, a / torch.where(ok, bb, 1.0), 0.0)

    def composite_normalize(x):
        n = composite_norm(x).unsqueeze(-1)
        return x / torch.where(n > 0, n, torch.ones_like(n))

    def composite_masked_mean(x):
        count = mask.sum(-1)
        ok = count > 0
        return torch.where(ok, torch.where(mask, x, 0.0).sum(-1) / torch.where(ok, count, 1), 0.0)

    c: Dict[str, Dict[str, object]] = {
        "softplus": dict(inputs=[vec], native=F.softplus, safe=ng.softplus,
                         composite=lambda x: torch.relu(x) + torch.log1p(torch.exp(-x.abs()))),
        "logaddexp": dict(inputs=[vec, b], native=torch.logaddexp, safe=ng.logaddexp,
                          composite=lambda a, bb: torch.maximum(a, bb) + torch.log1p(torch.exp(-(a - bb).abs()))),
        "logsumexp": dict(inputs=[mat], native=lambda x: torch.logsumexp(x, -1),
                          safe=lambda x: ng.logsumexp(x, -1), composite=composite_logsumexp),
        "logsumexp(mask)": dict(inputs=[mat], native=lambda x: torch.logsumexp(masked_scores(x), -1),
                                safe=lambda x: ng.logsumexp(x, -1, mask=mask),
                                composite=lambda x: composite_logsumexp(masked_scores(x))),
        "softmax": dict(inputs=[mat], native=lambda x: torch.softmax(x, -1), safe=lambda x: ng.softmax(x, -1),
                        composite=lambda x: composite_softmax(x)),
        "softmax(mask)": dict(inputs=[mat], native=lambda x: torch.softmax(masked_scores(x), -1),
                              safe=lambda x: ng.softmax(x, -1, mask=mask), composite=composite_softmax),
        "log_softmax": dict(inputs=[mat], native=lambda x: torch.log_softmax(x, -1),
                            safe=lambda x: ng.log_softmax(x, -1)),
        "log_softmax(mask)": dict(inputs=[mat], native=lambda x: torch.log_softmax(masked_scores(x), -1),
                                  safe=lambda x: ng.log_softmax(x, -1, mask=mask)),
        "xlogy": dict(inputs=[positive, positive.flip(0)], native=torch.xlogy, safe=ng.xlogy,
                      composite=lambda x, y: torch.where(x == 0, 0.0, x * torch.log(torch.where(x == 0, 1.0, y)))),
        "entropy": dict(inputs=[probs], native=lambda p: -(p * torch.log(p)).sum(-1), safe=ng.entropy,
                        composite=composite_entropy),
        "cross_entropy_probs": dict(inputs=[probs.flip(1), probs], native=lambda t, p: -(t * torch.log(p)).sum(-1),
                                    safe=ng.cross_entropy_probs),
        # targets that are 0 exactly where the probabilities underflowed to 0: 0 * log 0
        "cross_entropy_probs(0log0)": dict(inputs=[probs.roll(1, 1), probs],
                                           native=lambda t, p: -(t * torch.log(p)).sum(-1),
                                           safe=ng.cross_entropy_probs),
        "sqrt": dict(inputs=[positive], native=torch.sqrt, safe=ng.sqrt,
                     composite=_double_where(lambda x: x > 0, torch.sqrt)),
        "pow(0.3)": dict(inputs=[positive], native=lambda x: torch.pow(x, 0.3), safe=lambda x: ng.pow(x, 0.3),
                         composite=_double_where(lambda x: x > 0, lambda v: torch.pow(v, 0.3))),
        "norm": dict(inputs=[mat], native=lambda x: torch.linalg.vector_norm(x, dim=-1),
                     safe=lambda x: ng.norm(x, dim=-1), composite=composite_norm),
        "normalize": dict(inputs=[mat], native=lambda x: F.normalize(x, dim=-1), safe=ng.normalize,
                          composite=composite_normalize),
        "cosine_similarity": dict(inputs=[mat, mat.flip(0)], native=F.cosine_similarity, safe=ng.cosine_similarity),
        "distance_matrix": dict(inputs=[points], native=lambda x: torch.cdist(x, x), safe=ng.distance_matrix,
                                composite=gram_distances),
        "div": dict(inputs=[vec, b], native=torch.div, safe=ng.div, composite=composite_div),
        "masked_mean": dict(inputs=[mat], native=lambda x: (x * mask).sum(-1) / mask.sum(-1),
                            safe=lambda x: ng.masked_mean(x, mask, -1), composite=composite_masked_mean),
        "std": dict(inputs=[mat], native=lambda x: torch.std(x, -1), safe=lambda x: ng.std(x, -1)),
        "var": dict(inputs=[mat], native=lambda x: torch.var(x, -1), safe=lambda x: ng.var(x, -1)),
        "acos": dict(inputs=[unit], native=torch.acos, safe=ng.acos,
                     composite=_double_where(lambda x: x.abs() < 1, torch.acos)),
        "asin": dict(inputs=[unit], native=torch.asin, safe=ng.asin,
                     composite=_double_where(lambda x: x.abs() < 1, torch.asin)),
        "safe_where(log)": dict(inputs=[vec], native=lambda x: torch.where(x > 0, torch.log(x), 0.0),
                                safe=lambda x: ng.safe_where(x > 0, torch.log, x)),
    }
    return c


def small_cases() -> Dict[str, Dict[str, object]]:
    """10-element tensors: per-call (Python) overhead, common in losses."""
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(10, generator=g), torch.rand(10, generator=g) + 0.5
    pts = torch.randn(5, 2, generator=g)
    return {
        "small sqrt": dict(inputs=[x.abs()], native=torch.sqrt, safe=ng.sqrt),
        "small div": dict(inputs=[x, y], native=torch.div, safe=ng.div),
        "small norm": dict(inputs=[x], native=torch.linalg.vector_norm, safe=ng.norm),
        "small cosine": dict(inputs=[x, y], native=lambda a, b: F.cosine_similarity(a, b, dim=0),
                             safe=lambda a, b: ng.cosine_similarity(a, b, dim=0)),
        "small std": dict(inputs=[x], native=torch.std, safe=ng.std),
        "small distance": dict(inputs=[pts], native=lambda p: torch.cdist(p, p), safe=ng.distance_matrix),
        "small softmax": dict(inputs=[x], native=lambda v: torch.softmax(v, -1), safe=lambda v: ng.softmax(v, -1)),
    }


def shape_cases() -> Dict[str, Dict[str, object]]:
    """Shapes from real models: embeddings, point clouds, a vocabulary-sized loss, attention."""
    g = torch.Generator().manual_seed(2)
    emb, cloud = torch.randn(1024, 64, generator=g), torch.randn(4096, 3, generator=g)
    logits = torch.randn(256, 32000, generator=g)
    labels = torch.randint(0, 32000, (256,), generator=g)
    one_hot = F.one_hot(labels, 32000).float()
    vocab_kept = (torch.rand(1, 32000, generator=g) > 0.5) | F.one_hot(labels, 32000).bool()

    def masked_probs(z):
        return torch.softmax(z.masked_fill(~vocab_kept, float("-inf")), -1)

    scores = torch.randn(32, 128, 128, generator=g)
    keep = torch.rand(32, 1, 128, generator=g) > 0.2
    return {
        "distance_matrix 1024x64": dict(inputs=[emb], native=lambda p: torch.cdist(p, p), safe=ng.distance_matrix),
        "distance_matrix 4096x3": dict(inputs=[cloud], native=lambda p: torch.cdist(p, p), safe=ng.distance_matrix),
        "cross_entropy_probs one-hot 256x32000": dict(
            inputs=[logits], native=lambda z: F.cross_entropy(z, labels, reduction="sum"),
            safe=lambda z: ng.cross_entropy_probs(one_hot, torch.softmax(z, -1)).sum()),
        # exact zeros in the probabilities (a masked softmax): 0 * log 0 present; torch's only
        # op whose value is right there is xlogy (its gradient in q is NaN at 0/0)
        "cross_entropy_probs with zeros 256x32000": dict(
            inputs=[logits], native=lambda z: -torch.special.xlogy(one_hot, masked_probs(z)).sum(),
            safe=lambda z: ng.cross_entropy_probs(one_hot, masked_probs(z)).sum()),
        "softmax(mask) attention 32x128x128": dict(
            inputs=[scores], native=lambda z: torch.softmax(z.masked_fill(~keep, float("-inf")), -1),
            safe=lambda z: ng.softmax(z, -1, mask=keep)),
        "std 4096x64": dict(inputs=[emb.repeat(4, 1)], native=lambda v: torch.std(v, -1), safe=lambda v: ng.std(v, -1)),
    }


def run(rounds: int, only: Optional[List[str]], table=None) -> List[Dict[str, object]]:
    results = []
    for name, spec in (table or cases)().items():
        if only and name not in only:
            continue
        inputs = spec["inputs"]
        timed = {"native": _fwd_bwd(spec["native"], inputs), "nanguard": _fwd_bwd(spec["safe"], inputs)}
        if "composite" in spec:
            timed["composite"] = _fwd_bwd(spec["composite"], inputs)
        r = compare(timed, "native", rounds=rounds, inner=3, warmup=2)
        row = {"op": name, "native_ms": r["native"]["seconds"] * 1e3, "nanguard_ms": r["nanguard"]["seconds"] * 1e3,
               "ratio": r["nanguard"]["ratio"]}
        if "composite" in r:
            row.update(composite_ms=r["composite"]["seconds"] * 1e3, composite_ratio=r["composite"]["ratio"])
        results.append(row)
        print(f"  measured {name}: {row['ratio']:.2f}x", file=sys.stderr)
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", type=lambda s: s.split(","), default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    single_thread()
    results = run(args.rounds, args.only)
    extra = run(args.rounds, args.only, small_cases) + run(max(args.rounds // 4, 3), args.only, shape_cases)
    rows = [[r["op"], f"{r['native_ms']:.2f}", f"{r['nanguard_ms']:.2f}", f"{r['ratio']:.2f}x",
             f"{r['composite_ms']:.2f}" if "composite_ms" in r else "-",
             f"{r['composite_ratio']:.2f}x" if "composite_ratio" in r else "-"] for r in results]
    print(f"\nforward+backward, {N:.0e} elements, float32, CPU, {torch.get_num_threads()} thread, "
          f"median of {args.rounds} interleaved rounds (torch {torch.__version__})\n")
    print_table(rows, ["op", "native ms", "nanguard ms", "ratio", "composite ms", "composite ratio"])
    ratios = [r["ratio"] for r in results] or [float("nan")]
    print(f"\nmedian ratio {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x "
          f"({results[ratios.index(max(ratios))]['op'] if results else '-'}); goal: median <= 1.2x, none above 1.5x")
    if extra:
        print("\nsmall tensors (per-call overhead) and shapes from real models, forward+backward\n")
        print_table([[r["op"], f"{r['native_ms']:.3f}", f"{r['nanguard_ms']:.3f}", f"{r['ratio']:.2f}x"]
                     for r in extra], ["case", "native ms", "nanguard ms", "ratio"])
    if args.json:
        args.json.write_text(json.dumps(results + extra, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
