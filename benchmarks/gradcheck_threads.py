"""Why the test suite runs torch on one thread: one ``gradcheck`` of `nanguard.distance_matrix`
(a 30 x 16 float64 input, as ``tests/torch/ops/test_distance_gram.py`` checks it) timed with
torch's default thread count and with one thread, in the same run, rounds interleaved.

The default is what the suite ran with before ``tests/conftest.py`` set one thread for every
test; pytest runs two tests at a time (``make test`` uses ``-n 2``) on machines that other
jobs share, so torch's thread per core oversubscribes them. Run it without
``OMP_NUM_THREADS`` set, or the "default" is that setting:

    .venv/bin/python benchmarks/gradcheck_threads.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List

import torch

import nanguard.torch as ng


def _gradcheck_seconds(threads: int) -> float:
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, 16, generator=g, dtype=torch.float64).requires_grad_()
    start = time.perf_counter()
    assert torch.autograd.gradcheck(ng.distance_matrix, (x,))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    default = torch.get_num_threads()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, default threads {default}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load {os.getloadavg()[0]:.2f}")
    times: Dict[int, List[float]] = {default: [], 1: []}
    for _ in range(args.rounds):
        for threads in times:
            times[threads].append(_gradcheck_seconds(threads))
    for threads, samples in times.items():
        label = "before (torch default)" if threads == default and default != 1 else "after (one thread)"
        print(f"{label:<24} {threads:>2} thread(s): median {statistics.median(samples):.2f} s  "
              f"({', '.join(f'{s:.2f}' for s in samples)})")
    torch.set_num_threads(default)


if __name__ == "__main__":
    main()
