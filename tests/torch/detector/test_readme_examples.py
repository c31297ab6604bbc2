"""The README's detection examples print what the README shows: each is run as written (the
`detect` example as the `softplus.py` its output names, `nanguard run` on the shipped story)
and its report is compared, line for line, with the README's text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import List, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def readme_blocks() -> List[Tuple[str, str]]:
    """Every fenced block of the README, in order: (language, text)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", readme, re.S | re.M)]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")


@pytest.mark.slow
def test_detect_example_prints_the_readme_report(tmp_path):
    blocks = readme_blocks()
    i = next(i for i, (lang, text) in enumerate(blocks)
             if lang == "python" and 'with nanguard.detect(check="nan"):' in text)
    code, shown = blocks[i][1], blocks[i + 1][1]
    (tmp_path / "softplus.py").write_text(code)
    done = subprocess.run([sys.executable, "softplus.py"], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(), timeout=240)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("nanguard.errors.NonFiniteError: "))
    assert "\n".join(lines[start:]) == shown.rstrip("\n")


@pytest.mark.slow
def test_run_example_prints_the_readme_report_and_status(tmp_path):
    blocks = readme_blocks()
    shown = next(text for _, text in blocks
                 if text.startswith("$ nanguard run --json report.json -m nanguard.stories.distance_matrix_nan\n"))
    command, *rest = shown.rstrip("\n").splitlines()
    echo = rest.index("$ echo $?")
    report, status = rest[:echo], int(rest[echo + 1])
    # run from the repository root, as the story's path in the report says; the JSON goes to tmp
    args = command.split()[3:]          # after "$ nanguard run"
    args[args.index("report.json")] = str(tmp_path / "report.json")
    done = subprocess.run([sys.executable, "-m", "nanguard", "run", *args], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=240)
    assert done.returncode == status, done.stderr
    assert done.stderr.rstrip("\n").splitlines() == report
