"""The `lint` demo section: real findings on the bundled seed program, and the exact diff."""

from __future__ import annotations

import ast
import io

from nanguard.demo import Show
from nanguard.demo import lint as lint_demo


def test_demo_program_findings_and_fix(tmp_path):
    _path, findings, fixed, applied = lint_demo.lint_demo_program(tmp_path)
    assert [f.code for f in findings] == [
        "NG104", "NG501", "NG301", "NG101", "NG501", "NG401", "NG602", "NG101", "NG701"]
    assert applied == 2
    ast.parse(fixed)
    assert "tf.nn.log_softmax(logits)" in fixed and "torch.log_softmax(scores, dim=-1)" in fixed


def test_demo_section_prints_findings_and_diff():
    out = io.StringIO()
    lint_demo.run(Show(out))
    text = out.getvalue()
    assert "seed_stories.py:20:12: NG301" in text
    assert "+    return torch.log_softmax(scores, dim=-1)" in text
    assert "fixes that --fix would apply: 2" in text
