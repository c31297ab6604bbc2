"""A torch without one of the private APIs nanguard uses (simulated by deleting it before
nanguard is imported): ``nanguard.torch`` still imports, the features that do not need the API
still work, and the one that does raises `UnsupportedVersionError` naming the feature, the
torch version it needs and the installed one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import torch, torch.utils._python_dispatch as dispatch
    del dispatch.TorchDispatchMode          # what nanguard.detect's modes are built on
    del torch._softmax_backward_data        # the backward of nanguard.softmax

    import nanguard.torch as ng
    from nanguard.errors import UnsupportedVersionError

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    assert ng.sqrt(x).sum().item() == 1.0   # a safe op that needs neither
    y = ng.softmax(x, 0)                    # forward is public torch
    for feature in (lambda: y.sum().backward(), lambda: ng.detect().__enter__()):
        try:
            feature()
        except UnsupportedVersionError as error:
            print(error)
        else:
            raise AssertionError("no UnsupportedVersionError")
""")


def test_a_missing_private_api_fails_its_feature_only_with_a_clear_message() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    import torch
    have = torch.__version__.split("+")[0]
    assert done.stdout.splitlines() == [
        f"nanguard needs torch._softmax_backward_data from torch 2.13+; you have torch {have}",
        f"nanguard needs TorchDispatchMode from torch 2.13+; you have torch {have}",
    ]
