"""Cost of leaving detection on: one training step of the shared 4-layer transformer.

Same run, interleaved rounds, one thread (see benchmarks/common.py): the plain step, the
step inside ``nanguard.detect()`` (default mode), inside ``nanguard.detect(exhaustive=True)``
and inside ``torch.autograd.detect_anomaly(check_nan=True)``. Goals from the issue: default
<= 1.05x, exhaustive <= 1.5x.

It then checks that both modes *localise*: a NaN planted in one encoder layer's forward
(log of a negative number) and one in a backward (sqrt at 0) must be reported at the exact
op, line and module path.

Last, the memory: peak RSS of a language-model step whose loss is computed in the training
loop (bf16 logits, the shifted copy, float32 for the loss, as Hugging Face models do), plain
and under ``nanguard.detect()``, each in a fresh process (peak RSS only grows). Goal: the
detection's extra peak is a small fraction of the step's own.

    .venv/bin/python benchmarks/detect.py [--rounds 30] [--quick] [--skip-memory]
"""

from __future__ import annotations

import argparse
import inspect
import os
import resource
import subprocess
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nanguard  # noqa: E402
from benchmarks.common import compare, print_table, single_thread, transformer_step_factory  # noqa: E402


def _cases(step):
    default = nanguard.detect()
    exhaustive = nanguard.detect(exhaustive=True)

    def with_default():
        with default:
            return step()

    def with_exhaustive():
        with exhaustive:
            return step()

    def with_anomaly():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # "Anomaly Detection has been enabled..."
            with torch.autograd.detect_anomaly(check_nan=True):
                return step()

    return {"plain": step, "nanguard.detect()": with_default, "detect(exhaustive=True)": with_exhaustive,
            "detect_anomaly": with_anomaly}


class _Planted(torch.nn.Module):
    """Wraps an encoder layer and plants a NaN on demand (forward: log(-1); backward: sqrt(0))."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.layer = layer
        self.fault = None

    def forward(self, x, *args, **kwargs):
        y = self.layer(x, *args, **kwargs)
        if self.fault == "forward":
            y = y + torch.log(y.detach()[:1, :1, :1] * 0 - 1)   # PLANTED-FORWARD
        elif self.fault == "backward":
            y = y + torch.sqrt(y[:1, :1, :1] * 0)                  # PLANTED-BACKWARD
        return y


def _localisation() -> list:
    source = inspect.getsource(_Planted).splitlines()
    first = inspect.getsourcelines(_Planted)[1]
    lines = {tag: first + i for i, text in enumerate(source) for tag in ("FORWARD", "BACKWARD")
             if f"PLANTED-{tag}" in text}
    rows = []
    for exhaustive in (False, True):
        for fault in ("forward", "backward"):
            net, _, step = transformer_step_factory()   # fresh weights: a recorded NaN step poisons them
            encoder = net[0]
            planted = _Planted(encoder.layers[2])
            encoder.layers[2] = planted
            planted.fault = fault
            with nanguard.detect(mode="record", exhaustive=exhaustive, modules={"net": net}) as d:
                step()
            r = d.report
            want_line = lines[fault.upper()]
            ok = (r is not None and r.phase == fault and r.line == want_line
                  and r.module == "net.0.layers.2" and r.file == os.path.abspath(__file__))
            rows.append(["exhaustive" if exhaustive else "default", fault,
                         f"{r.phase}: {r.op} @ line {r.line} in {r.module}" if r else "nothing",
                         "ok" if ok else "WRONG"])
    return rows


def _lm_step_peak_rss(mode: str, vocab: int = 32000, batch: int = 2, seq: int = 1024) -> None:
    """Child process: print the peak RSS (MiB) before and after three LM steps in ``mode``."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 64), torch.nn.Linear(64, vocab, bias=False))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    ids = torch.randint(0, vocab, (batch, seq))

    def step():
        logits = model(ids).to(torch.bfloat16)
        shifted = logits[:, :-1, :].contiguous().float()
        loss = torch.nn.functional.cross_entropy(shifted.view(-1, vocab), ids[:, 1:].reshape(-1))
        del logits, shifted
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if mode == "plain":
        for _ in range(3):
            step()
    else:
        with nanguard.detect(exhaustive=(mode == "exhaustive")):
            for _ in range(3):
                step()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{before:.1f} {after:.1f} {batch * seq * vocab * 4 / 2**20:.1f}")


def _memory() -> list:
    """[case, step peak MiB, extra vs plain MiB, extra / step] for plain and the default mode."""
    here = os.path.abspath(__file__)
    runs = {}
    for mode in ("plain", "default"):
        done = subprocess.run([sys.executable, here, "--rss-child", mode], capture_output=True, text=True,
                              check=True, env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(here))))
        before, after, logits = (float(v) for v in done.stdout.split())
        runs[mode] = (before, after, logits)
    base_before, base_after, logits = runs["plain"]
    step_peak = base_after - base_before
    rows = []
    for mode, (before, after, _) in runs.items():
        extra = (after - before) - step_peak
        rows.append([mode, f"{logits:.0f}", f"{after - before:.0f}", f"{extra:+.0f}",
                     f"{extra / step_peak:+.1%}" if step_peak > 0 else "-"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test, noisy numbers)")
    parser.add_argument("--skip-memory", action="store_true", help="leave out the peak-RSS comparison")
    parser.add_argument("--rss-child", choices=("plain", "default", "exhaustive"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        _lm_step_peak_rss(args.rss_child)
        return 0
    single_thread()
    _, _, step = transformer_step_factory()
    rounds = 4 if args.quick else args.rounds
    results = compare(_cases(step), "plain", rounds=rounds, inner=args.inner)
    print(f"Training step of a 4-layer nn.TransformerEncoder (d_model=128, 4 heads, ff=256, batch 16x32), "
          f"CPU, 1 thread; median of {rounds} interleaved rounds")
    print_table([[name, f"{r['seconds'] * 1e3:.2f}", f"{r['ratio']:.3f}x"] for name, r in results.items()],
                ["case", "ms/step", "vs plain"])
    print()
    goals = {"nanguard.detect()": 1.05, "detect(exhaustive=True)": 1.5}
    for name, goal in goals.items():
        ratio = results[name]["ratio"]
        print(f"goal {name}: <= {goal}x  measured {ratio:.3f}x  {'met' if ratio <= goal else 'NOT MET'}")
    print()
    rows = _localisation()
    print_table(rows, ["mode", "planted", "reported", "check"])
    if not args.skip_memory:
        print()
        print("Peak RSS of 3 language-model steps (vocab 32000, 2x1024 tokens, bf16 logits + shifted float32 "
              "copy, loss in the loop), fresh process each; extra = peak growth beyond plain's")
        print_table(_memory(), ["case", "logits MiB", "step peak MiB", "extra MiB", "extra / step"])
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
