"""Demo section "audit": the NaN found before it fires.

The founding story's program (``nanguard.stories.distance_matrix_nan``) is audited exactly
as ``nanguard audit`` would: traced up to its first ``backward()``, where its losses are
still finite, then bounded op by op. The audit flags the Gram-expansion ``sqrt``, finds a
concrete input that makes its gradient infinite (the witness), replays that witness, and
names the fix; the fixed program is audited clean. Then a one-function audit shows the
cross-entropy story (``-sum(y * log(softmax(z)))``) flagged with ``log_softmax`` as the fix.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile

import torch

import nanguard
import nanguard.stories
from nanguard.demo import Show
from nanguard.torch.auditor.emit import replay_witness

STORY = nanguard.stories.get("distance_matrix")


def run(show: Show) -> None:
    show.title("Audit: find the NaN before it fires")
    show.story("The distance-matrix story, audited before training: no NaN has happened yet")
    show.code(f"nanguard audit {STORY.path('nan').name}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        result = nanguard.audit_script(str(STORY.path("nan")), witness_dir=os.path.join(tmp, "witnesses"),
                                       witness_budget=3.0)
        replayed = [replay_witness(f.witness) for f in result.findings if f.witness]
    for f in result.findings:
        show.bad(f"line {f.line}: {f.op} can produce {f.result} ({f.phase})", f.code)
        show.note(f"why: {f.why}")
        show.note(f"fix: {f.fix}")
    for outcome in replayed:
        show.bad("witness replayed", outcome.message.split(";")[0])
    if not result.findings:
        raise RuntimeError("the audit missed the distance-matrix story")
    with contextlib.redirect_stdout(io.StringIO()):
        fixed = nanguard.audit_script(str(STORY.path("fixed")), witness=False)
    show.good(f"{STORY.path('fixed').name} audited", f"{len(fixed.findings)} findings")

    show.story("One function, audited with example inputs: cross-entropy written by hand")
    show.code("""
def loss(logits, y):
    return -(y * torch.log(torch.softmax(logits, -1))).sum()
nanguard.audit(loss, torch.randn(4, 3), one_hot)""")

    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -(y * torch.log(torch.softmax(logits, -1))).sum()

    one_hot = torch.eye(3)[[0, 1, 2, 0]]
    found = nanguard.audit(loss, torch.randn(4, 3), one_hot).findings
    for f in found:
        show.bad(f"{f.op} can produce {f.result}", f"softmax's range reaches [{f.range[0]:g}, {f.range[1]:g}]")
        show.note(f"fix: {f.fix}")

    def fixed_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -(y * torch.log_softmax(logits, -1)).sum()

    show.good("with log_softmax", f"{len(nanguard.audit(fixed_loss, torch.randn(4, 3), one_hot).findings)} findings")


__all__ = ["run"]
