"""A finding under ``torch.inference_mode()`` leaves torch usable afterwards (issue 14).

InferenceMode's guard saves the thread's dispatch keys on entry and restores them on exit.
Taking the last dispatch mode off the stack inside it used to leave the Python key on with
no mode behind it, after which every op, even ``torch.empty``, hit PyTorch's internal assert.
The broken state poisons the whole process, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

PROGRAM = textwrap.dedent("""\
    import sys
    import torch
    import nanguard
    from torch import nn

    mode, exhaustive = sys.argv[1], sys.argv[2] == "exhaustive"

    class Server(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 3)

        def forward(self, x):
            return torch.log(self.proj(x) * 0)      # log(0): a finding inside the module

    model = Server()
    detection = nanguard.detect(mode=mode, exhaustive=exhaustive)
    try:
        with detection:
            with torch.inference_mode():
                model(torch.ones(2, 3))
    except FloatingPointError:
        pass                                      # serving code catches it and carries on
    assert detection.report is not None and detection.report.op == "aten.log.default", detection.report
    assert torch._C._len_torch_dispatch_stack() == 0
    fresh = nn.Linear(4, 2)                       # what used to raise the INTERNAL ASSERT
    out = fresh(torch.empty(5, 4).fill_(1.0))
    with torch.inference_mode():
        again = model(torch.ones(2, 3))           # the model keeps serving
    print("usable", tuple(out.shape), tuple(again.shape))
""")


@pytest.mark.slow
@pytest.mark.parametrize("exhaustive", ["default", "exhaustive"])
@pytest.mark.parametrize("mode", ["raise", "record", "warn"])
def test_torch_is_usable_after_a_finding_under_inference_mode(tmp_path, mode, exhaustive):
    script = tmp_path / "serve.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, str(script), mode, exhaustive], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usable (5, 2) (2, 3)" in done.stdout
