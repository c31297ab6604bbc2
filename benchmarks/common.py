"""Same-run timing for the benchmarks: interleaved rounds, ratios taken within a round.

This machine is a shared VM whose speed drifts by 2x over seconds, so a case is never
compared with a baseline timed minutes earlier. Each round times every case back to back
(in rotating order) and the reported ratio is the median over rounds of case/baseline.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Optional

import torch


def time_call(fn: Callable[[], object], inner: int,
              clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    for _ in range(inner):
        fn()
    return (clock() - start) / inner


def compare(cases: Dict[str, Callable[[], object]], baseline: str, rounds: int = 30,
            inner: int = 5, warmup: int = 3,
            clock: Callable[[], float] = time.perf_counter) -> Dict[str, Dict[str, float]]:
    """Time every case in interleaved rounds; return median seconds and median ratio to baseline.
    `clock`: wall time by default; ``time.process_time`` counts this process's CPU time only,
    for a single-threaded case on a machine whose other processes take most of the CPU."""
    names = list(cases)
    for name in names:
        for _ in range(warmup):
            cases[name]()
    samples: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            samples[name].append(time_call(cases[name], inner, clock))
    out = {}
    for name in names:
        ratios = [s / b for s, b in zip(samples[name], samples[baseline])]
        out[name] = {"seconds": statistics.median(samples[name]), "ratio": statistics.median(ratios)}
    return out


def single_thread() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)


def transformer(d_model: int = 128, heads: int = 4, ff: int = 256, layers: int = 4,
                seed: int = 0) -> torch.nn.Module:
    """The shared benchmark model: a 4-layer nn.TransformerEncoder with a linear head (0.53 M
    parameters), the same weights for the same seed."""
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=ff, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return torch.nn.Sequential(model, torch.nn.Linear(d_model, 1))


def transformer_step_factory(batch: int = 16, seq: int = 32, d_model: int = 128, heads: int = 4,
                             ff: int = 256, layers: int = 4,
                             make_update: Optional[Callable[[torch.nn.Module, torch.optim.Optimizer],
                                                            Callable[[], object]]] = None,
                             autocast: Optional[torch.dtype] = None):
    """The shared benchmark model: a 4-layer nn.TransformerEncoder training step on CPU.

    Returns (model, optimizer, step) where step() runs forward, backward and the update:
    optimizer.step(), or what `make_update(model, optimizer)` returns (e.g. a guard's step).
    `autocast`: the forward under ``torch.autocast("cpu", dtype=autocast)``.
    """
    net = transformer(d_model, heads, ff, layers)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    inputs = torch.randn(batch, seq, d_model)
    target = torch.randn(batch, seq, 1)
    update = optimizer.step if make_update is None else make_update(net, optimizer)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        if autocast is None:
            out = net(inputs)
        else:
            with torch.autocast("cpu", dtype=autocast):
                out = net(inputs).float()
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        update()
        return loss

    return net, optimizer, step


def print_table(rows: List[List[str]], header: List[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
