"""Demo section "detect": a real program with a NaN bug, run under ``nanguard run``.

Replays the distance-matrix seed: the loss prints ``nan`` from step 2 and nothing says why.
``nanguard run`` stops at the first non-finite value (the backward of sqrt on the matrix's
zero diagonal), prints the line, the module-free location, the explanation and the fix; the
fixed script, which uses ``nanguard.distance_matrix``, then runs clean under the same command.
Both are real subprocesses, exactly what a user would type.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

import torch

import nanguard
from nanguard.demo import Show

_EXAMPLES = Path(nanguard.__file__).resolve().parent.parent / "examples"
BUGGY = "distance_matrix_nan.py"
FIXED = "distance_matrix_fixed.py"


def _nanguard_run(script: Path, json_path: Optional[str]) -> Tuple[int, str, str]:
    cmd = [sys.executable, "-m", "nanguard", "run", "--color", "never"]
    if json_path:
        cmd += ["--json", json_path]
    cmd.append(str(script))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(_EXAMPLES.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(_EXAMPLES.parent), env=env)
    return done.returncode, done.stdout, done.stderr


def _indent(text: str) -> List[str]:
    return [line for line in text.rstrip("\n").splitlines()]


def run(show: Show) -> None:
    show.title("Detect & locate: the first NaN, where and why")
    buggy, fixed = _EXAMPLES / BUGGY, _EXAMPLES / FIXED
    if not buggy.exists() or not fixed.exists():
        show.note(f"(skipped: the example scripts are not in {_EXAMPLES}; run from a source checkout)")
        return

    show.story("Seed: a distance-matrix loss prints `nan` from the second step, and nothing says why.")
    show.code("""
distance_matrix = torch.sqrt(diag_1 + diag_2 - (2 * gram_matrix))   # diagonal is exactly 0
loss = obj(pred_distance_matrix, true_distance_matrix)
loss.backward()                                                       # grad of sqrt at 0: inf
""")
    show.code(f"$ nanguard run --json report.json examples/{BUGGY}")
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        status, out, err = _nanguard_run(buggy, report_path)
        for line in _indent(err):
            show.note(line)
        if status == 1 and os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as fh:
                found = json.load(fh)
            show.bad(f"exit status {status}",
                     f"{found['phase']} of {found['torch_function']} ({found['op']}, node {found['node']}) "
                     f"at {Path(found['file']).name}:{found['line']}")
        else:
            show.bad("unexpected result", f"status {status}\n{out}\n{err}")

    show.story("The fix it names: nanguard.distance_matrix (zero gradient on the diagonal).")
    show.code(f"$ nanguard run examples/{FIXED}")
    status, out, err = _nanguard_run(fixed, None)
    losses = [line for line in out.splitlines() if line.startswith("step")]
    if status == 0:
        show.good(f"exit status {status}", "no NaN or Inf anywhere, forward or backward")
        for line in losses:
            show.note(line)
    else:
        show.bad(f"exit status {status}", err.strip().splitlines()[-1] if err.strip() else out)

    show.story("Deliberate infinities are not bugs: a -inf attention mask is not reported.")
    show.code("""
with nanguard.detect():
    scores = q @ k.T
    scores = scores.masked_fill(~causal, float("-inf"))   # -inf on purpose
    attn = torch.softmax(scores, -1)                       # finite: nothing to report
""")
    q, k = torch.randn(4, 8), torch.randn(4, 8)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    with nanguard.detect(mode="record") as d:
        attn = torch.softmax((q @ k.T).masked_fill(~causal, float("-inf")), -1)
    if d.report is None and bool(torch.isfinite(attn).all()):
        show.good("masked softmax", "finite, and detect() stayed quiet")
    else:
        show.bad("masked softmax", d.report)
