"""A JAX without the private dispatch API nanguard.jax.detect uses (simulated by deleting it
before nanguard is imported): ``nanguard.jax`` imports, the safe ops work, and ``detect()``
raises `UnsupportedVersionError` naming the JAX version it needs and the installed one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import jax.numpy as jnp
    from jax._src import api
    del api._post_hook_state   # read at JAX's import only; nanguard swaps it per thread

    import nanguard.jax as ng
    from nanguard.errors import UnsupportedVersionError

    assert float(ng.sqrt(jnp.asarray(4.0))) == 2.0
    try:
        with ng.detect():
            pass
    except UnsupportedVersionError as error:
        print(error)
""")


def test_a_missing_private_api_fails_detect_only_with_a_clear_message() -> None:
    import jax
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"nanguard needs nanguard.jax.detect's dispatch hooks "
                                   f"(jax._src.api._post_hook_state) from jax 0.10+; you have jax {jax.__version__}")
