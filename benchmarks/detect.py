"""Cost of leaving detection on: one training step of the shared 4-layer transformer.

Same run, interleaved rounds, one thread (see benchmarks/common.py): the plain step, the
step inside ``nanguard.detect()`` (default mode), inside ``nanguard.detect(exhaustive=True)``
and inside ``torch.autograd.detect_anomaly(check_nan=True)``. Goals from the issue: default
<= 1.05x, exhaustive <= 1.5x.

It then checks that both modes *localise*: a NaN planted in one encoder layer's forward
(log of a negative number) and one in a backward (sqrt at 0) must be reported at the exact
op, line and module path.

    .venv/bin/python benchmarks/detect.py [--rounds 30] [--quick]
"""

from __future__ import annotations

import argparse
import inspect
import os
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test, noisy numbers)")
    args = parser.parse_args(argv)
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
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
