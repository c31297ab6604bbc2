"""optax is imported only when a guard is built, and its absence is explained."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_importing_the_guard_does_not_import_optax():
    done = _python("import sys, nanguard.jax, nanguard.jax.guard; print('optax' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_without_optax_the_error_names_what_to_install():
    done = _python("import sys; sys.modules['optax'] = None\nimport nanguard.jax as nj\n"
                   "try:\n    nj.guarded(None)\nexcept ImportError as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert "pip install optax" in done.stdout and "nanguard[jax]" in done.stdout
