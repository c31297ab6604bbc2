"""The seed-story corpus (`nanguard.stories`) under the detector, and the `make demo` section.

The founding story is written once, in nanguard.stories; the demo, the lint tests and these
tests all read that file. Here: the NaN version is reported at the story's own sqrt line
(in process, in both checking modes, and as a subprocess under `nanguard run`), the fixed
version trains clean, and the README's excerpt of the report names the story's real lines.
"""

from __future__ import annotations

import importlib
import io
import linecache
import os
import re

import pytest
import torch

import nanguard
import nanguard.stories
from nanguard.demo import Show

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STORY = nanguard.stories.get("distance_matrix")


def _story_module(version: str):
    return importlib.import_module(STORY.module(version))


def test_corpus_lists_runnable_stories_with_both_versions():
    assert [(s.name, s.framework) for s in nanguard.stories.STORIES] == [
        ("distance_matrix", "torch"), ("tf_cross_entropy", "tensorflow"), ("tf_softmax", "tensorflow"),
        ("jax_sqrt_where", "jax")]
    for story in nanguard.stories.STORIES:
        for version in nanguard.stories.VERSIONS:
            path = story.path(version)
            assert path.is_file() and path.parent == STORY.path().parent
            assert f"import {story.framework}" in story.source(version)
            if story.framework != "torch":
                continue  # the TF and JAX stories run in tests/tf and tests/jax
            module = importlib.import_module(story.module(version))
            assert os.path.abspath(module.__file__) == str(path)
            assert callable(module.main)
    assert nanguard.stories.get("distance_matrix") is STORY
    with pytest.raises(KeyError, match="no story 'nope'"):
        nanguard.stories.get("nope")
    with pytest.raises(ValueError, match="version must be one of"):
        STORY.path("broken")
    with pytest.raises(LookupError, match="on 3 lines"):
        STORY.line("compute_distance_matrix(")      # the def and both calls


def test_story_in_process_buggy_caught_fixed_clean():
    with nanguard.detect(mode="record") as d:
        _story_module("nan").main(steps=2)
    r = d.report
    assert (r.file, r.line) == (str(STORY.path("nan")), STORY.line("torch.sqrt("))
    assert r.call_line == STORY.line("loss.backward()")
    assert r.node == "SqrtBackward0" and r.function == "compute_distance_matrix"
    assert STORY.fix in r.suggestion
    with nanguard.detect() as d:
        final = _story_module("fixed").main(steps=5)
    assert d.report is None and torch.isfinite(torch.tensor(final))


def test_story_without_nanguard_goes_nan():
    """The story is real: run plainly, its loss is NaN from step 2, as the README says."""
    assert torch.isnan(torch.tensor(_story_module("nan").main(steps=2)))


def test_readme_excerpt_names_the_storys_lines():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    cited = re.findall(r"nanguard/stories/distance_matrix_nan\.py:(\d+)", readme)
    assert cited == [str(STORY.line("torch.sqrt(")), str(STORY.line("loss.backward()"))]
    n = STORY.line("torch.sqrt(")
    assert f"{n} │ {linecache.getline(str(STORY.path()), n).strip()}" in readme
    assert "examples/" not in readme


@pytest.mark.slow
def test_demo_section_runs_the_real_story():
    from nanguard.demo import detect as section
    out = io.StringIO()
    section.run(Show(out))
    text = out.getvalue()
    assert "nanguard: first non-finite value (NaN) — backward of sqrt" in text
    assert ("exit status 1: backward of torch.sqrt (aten.div.Tensor, node SqrtBackward0) at "
            f"distance_matrix_nan.py:{STORY.line('torch.sqrt(')}") in text
    assert "✓ exit status 0" in text and "step 5: loss" in text
    assert "detect() stayed quiet" in text
