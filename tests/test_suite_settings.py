"""Settings `tests/conftest.py` makes for the whole suite, whatever the directory a test is in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_torch_runs_on_one_thread_in_every_test():
    torch = pytest.importorskip("torch")
    assert torch.get_num_threads() == 1


def test_the_root_conftest_imports_neither_tensorflow_nor_jax():
    code = "import sys, tests.conftest; print(sorted(m for m in ('tensorflow', 'jax', 'keras') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
