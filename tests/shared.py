"""Pieces the torch test folders share: the seed-story model, bitwise snapshots, and the
launcher of multi-process (gloo) runs with its worker-side exit."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import torch


class SqrtNet(torch.nn.Module):
    """`sqrt(|h|^2)`, the seed's distance-matrix story: a zero input row gives a finite loss
    and a NaN gradient in `embed.weight` only (d sqrt/du = inf at 0, times 2h = 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(4, 8, bias=False)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.head(torch.tanh(h)) + 0.1 * torch.sqrt((h * h).sum(-1, keepdim=True))


def snapshot(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    """Parameters and the full optimizer state (moments, step counters), cloned."""
    return {"params": [p.detach().clone() for p in model.parameters()],
            "state": copy.deepcopy(optimizer.state_dict())}


def assert_bitwise(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, path
        if a.is_floating_point():
            width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
            assert torch.equal(a.view(width), b.view(width)), f"{path} differs"
        else:
            assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_bitwise(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_bitwise(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a != a and b != b), f"{path}: {a!r} != {b!r}"


ROOT = Path(__file__).resolve().parents[1]


def launch(label: str, commands: Sequence[List[str]], envs: Sequence[Dict[str, str]],
           tmp_path: Path, deadline_s: float) -> list:
    """Run one process per rank; return each rank's JSON result (the last argument of its
    command is the path it writes). If a rank fails, the others are killed at once; the
    deadline bounds the whole run, so a broken agreement (a rank waiting in a collective
    forever) shows up as a failure with every rank's log, never as a hang."""
    import pytest

    procs, logs = [], []
    for rank, (cmd, extra) in enumerate(zip(commands, envs)):
        env = dict(os.environ, OMP_NUM_THREADS="1", **extra,
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        logs.append(open(tmp_path / f"rank{rank}.log", "w+"))
        procs.append(subprocess.Popen([sys.executable, *cmd], stdout=logs[-1],
                                      stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path)))
    end = time.monotonic() + deadline_s
    failure = None
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs):
                failure = "a rank failed"
                break
            if time.monotonic() > end:
                failure = f"timed out after {deadline_s:.0f} s (a rank waits in a collective?)"
                break
            time.sleep(0.05)
        if failure is None and any(p.returncode != 0 for p in procs):
            failure = "a rank failed"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    text = []
    for rank, log in enumerate(logs):
        log.seek(0)
        text.append(f"--- rank {rank} (exit {procs[rank].returncode}) ---\n{log.read()[-4000:]}")
        log.close()
    if failure:
        pytest.fail(f"{label}: {failure}\n" + "\n".join(text))
    return [json.loads(Path(cmd[-1]).read_text()) for cmd in commands]


def leave(code: int) -> None:
    """A worker's exit, after a barrier: without gloo's teardown. When one rank tears its
    process group down while the other still holds the connection, gloo's C++ destructors
    can abort ("terminate called without an active exception", exit -6) after all the work
    is done and written."""
    import torch.distributed as dist

    if code == 0 and dist.is_initialized():
        dist.barrier()  # both ranks finish together
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
