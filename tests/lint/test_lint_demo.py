"""The `lint` demo section: real findings on the bundled seed program, and the exact diff."""

from __future__ import annotations

import ast
import io

from nanguard.demo import Show
from nanguard.demo import lint as lint_demo


def test_demo_program_findings_and_fix(tmp_path):
    _path, findings, fixed, applied = lint_demo.lint_demo_program(tmp_path)
    assert [f.code for f in findings] == [
        "NG104", "NG501", "NG101", "NG501", "NG401", "NG602", "NG101", "NG701"]
    assert applied == 2
    ast.parse(fixed)
    assert "tf.nn.log_softmax(logits)" in fixed and "torch.log_softmax(scores, dim=-1)" in fixed


def test_demo_lints_the_story_corpus():
    """The founding story is linted from its file in nanguard.stories, not from a copy."""
    story = lint_demo.STORY
    assert [(f.path, f.line, f.code) for f in lint_demo.lint_story("nan")] == [
        ("nanguard/stories/distance_matrix_nan.py", story.line("torch.sqrt("), "NG301")]
    assert lint_demo.lint_story("fixed") == []
    assert "sqrt" not in lint_demo.SEED_PROGRAM       # written once: not copied here too


def test_demo_section_prints_findings_and_diff():
    out = io.StringIO()
    lint_demo.run(Show(out))
    text = out.getvalue()
    line = lint_demo.STORY.line("torch.sqrt(")
    assert f"nanguard/stories/distance_matrix_nan.py:{line}:12: NG301" in text
    assert "✓ nanguard/stories/distance_matrix_fixed.py: no findings" in text
    assert "seed_stories.py:7:12: NG104" in text
    assert "+    return torch.log_softmax(scores, dim=-1)" in text
    assert "fixes that --fix would apply: 2" in text
