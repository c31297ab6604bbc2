"""Demo section "detect": a real program with a NaN bug, run under ``nanguard run``.

Replays the founding seed story (``nanguard.stories.distance_matrix_nan``): the loss prints
``nan`` from step 2 and nothing says why. ``nanguard run`` stops at the first non-finite
value (the backward of sqrt on the matrix's zero diagonal), prints the line, the
explanation and the fix; the fixed program, which uses ``nanguard.distance_matrix``, then
runs clean under the same command. Both are real subprocesses, exactly what a user would
type, and both programs ship with nanguard, so this works from an installed wheel too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import nanguard
import nanguard.stories
from nanguard.core.report import Report
from nanguard.demo import Show

STORY = nanguard.stories.get("distance_matrix")


def _nanguard_run(module: str, json_path: str | None) -> tuple[int, str, str]:
    """``nanguard run [--json PATH] -m module`` in a subprocess that imports this nanguard."""
    cmd = [sys.executable, "-m", "nanguard", "run", "--color", "never"]
    if json_path:
        cmd += ["--json", json_path]
    cmd += ["-m", module]
    # run from the directory holding the nanguard package, so the report names the story as
    # nanguard/stories/<file>.py (from inside the package, `import torch` would find nanguard/torch)
    root = str(Path(nanguard.__file__).resolve().parent.parent)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys([root, *inherited])))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=root, env=env, check=False)
    return done.returncode, done.stdout, done.stderr


def run(show: Show) -> None:
    show.title("Detect & locate: the first NaN, where and why")
    buggy, fixed = STORY.module("nan"), STORY.module("fixed")

    show.story("Seed: a distance-matrix loss prints `nan` from the second step, and nothing says why.")
    source = STORY.source("nan").splitlines()
    for text in ("torch.sqrt(", "loss = obj(", "loss.backward()"):
        n = STORY.line(text)
        show.code(f"{n:3} │ {source[n - 1].strip()}")
    show.note("(the diagonal of the matrix under the sqrt is exactly 0, and sqrt's gradient at 0 is inf)")
    show.code(f"$ nanguard run --json report.json -m {buggy}")
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        status, out, err = _nanguard_run(buggy, report_path)
        for line in err.rstrip("\n").splitlines():
            show.note(line)
        if status == 1 and os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as fh:
                found = Report.from_dict(json.load(fh))
            show.bad(f"exit status {status}",
                     f"{found.phase} of {found.api} ({found.op}, node {found.node}) "
                     f"at {Path(found.file or '?').name}:{found.line}")
        else:
            show.bad("unexpected result", f"status {status}\n{out}\n{err}")

    show.story(f"The fix it names: {STORY.fix} (zero gradient on the diagonal).")
    show.code(f"$ nanguard run -m {fixed}")
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
