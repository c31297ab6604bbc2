"""The README's JAX detection example reports the line its comment says."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.slow
def test_jax_detect_example_names_the_line_its_comment_says(tmp_path):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    block = next(m.group(1) for m in re.finditer(r"^```python\n(.*?)^```$", readme, re.S | re.M)
                 if "nanguard.jax as ngj" in m.group(1) and "with ngj.detect():" in m.group(1))
    # the example up to its detect() call (the optax lines after it use the reader's own params)
    code = block[:block.index("\ntx = ")] + "\n"
    said = re.search(r"# FloatingPointError: (backward|forward) of (\w+) at line (\d+)", code)
    assert said is not None, code
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1"), timeout=240)
    assert done.returncode == 1
    headline = re.search(r"nanguard\.errors\.NonFiniteError: nanguard: first non-finite value \(.*?\) — "
                         r"(backward|forward) of (\w+)\n  at  example\.py:(\d+) in ", done.stderr)
    assert headline is not None, done.stderr[-3000:]
    assert headline.groups() == said.groups()
    assert "training loop" not in done.stderr       # one call: no loop
