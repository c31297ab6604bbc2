"""Demo section "lint": the seed stories' code, checked before anything runs.

First the founding story's two programs, read from ``nanguard.stories`` (the files
``nanguard demo`` runs in the detect section): the NaN version is flagged at its sqrt, the
fixed one is clean. Then the bundled program below, the other seed stories' anti-patterns,
written to a temporary `seed_stories.py` and linted exactly as `nanguard lint
seed_stories.py` would, with the `--diff` of the fixes the linter can make on its own.
Nothing here imports or runs a program, and nothing imports torch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import nanguard.stories
from nanguard.lint.checker import ALL_CODES, check_source
from nanguard.lint.output import unified_diff
from nanguard.lint.runner import fix_text

STORY = nanguard.stories.get("distance_matrix")

# The other seed stories' anti-patterns, as their authors first wrote them (trimmed).
SEED_PROGRAM = '''\
"""The seed stories' code, as first written."""
import tensorflow as tf
import torch


def softplus(x):                                    # story 1: log(1 + exp(x)) by hand
    return x.exp().log1p()


def softplus_patched(x):                            # story 1: "replace the infs with x"
    exp = x.exp()
    return x.where(torch.isinf(exp), exp.log1p())


def classifier_loss(logits, y_):                    # story 3: cross-entropy by hand
    return -tf.reduce_sum(y_ * tf.math.log(tf.nn.softmax(logits)))


def reciprocal(x):                                  # story 3: the single where
    x_ok = tf.not_equal(x, 0.)
    f = lambda x: 1. / x
    return tf.where(x_ok, f(x), tf.zeros_like(x))


def mean_pool(embedded, input, pad):                # story 3: divide by a count
    return tf.reduce_sum(embedded) / tf.reduce_sum(tf.not_equal(input, pad))


def probabilities(logits):                          # story 4: clip the logits
    safe_logits = tf.clip_by_value(logits, -15.0, 15.0)
    return tf.nn.softmax(logits=safe_logits, name="Softmax")


def attention_logp(scores, keep):                   # padding mask, then log of softmax
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.log(torch.softmax(scores, dim=-1))
'''


def story_display(version: str) -> str:
    """How `nanguard lint` would be given the story's file: nanguard/stories/file.py."""
    path = STORY.path(version)
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


def lint_story(version: str) -> list:
    """The findings of `nanguard lint` on one version ("nan" or "fixed") of the story."""
    return check_source(STORY.path(version).read_bytes(), story_display(version), ALL_CODES,
                        STORY.module(version))


def lint_demo_program(directory: Path) -> tuple:
    """Write the program, lint it; return (path, findings, fixed text, fixes applied)."""
    path = directory / "seed_stories.py"
    path.write_text(SEED_PROGRAM, encoding="utf-8")
    findings = check_source(path.read_bytes(), "seed_stories.py", ALL_CODES, "seed_stories", possible=frozenset())
    fixed, applied, _remaining = fix_text(SEED_PROGRAM, "seed_stories.py", ALL_CODES)
    return path, findings, fixed, applied


def run(show) -> None:
    show.title("Lint: find the anti-patterns before anything runs")
    show.story("The founding story, checked statically: the NaN version and its fix")
    for version in ("nan", "fixed"):
        show.code(f"$ nanguard lint {story_display(version)}")
        found = lint_story(version)
        for f in found:
            show.bad(f"{f.path}:{f.line}:{f.col}", f"{f.code} {f.message}")
        if not found:
            show.good(story_display(version), "no findings")
    show.story("The other seed stories' code, checked statically (the default: story 4's clamp of the "
               "logits is reported too, a bias rather than a NaN)")
    with tempfile.TemporaryDirectory() as tmp:
        _path, findings, fixed, applied = lint_demo_program(Path(tmp))
    show.code("$ nanguard lint seed_stories.py")
    for f in findings:
        show.bad(f"{f.path}:{f.line}:{f.col}", f"{f.code} {f.message}")
    fixable = sum(1 for f in findings if f.fix is not None)
    show.note(f"{len(findings)} findings; {fixable} with an exact automatic fix. "
              "`nanguard lint --explain CODE` tells the story behind each code.")
    show.story("`nanguard lint --diff seed_stories.py`: the semantics-preserving rewrites")
    diff = unified_diff("seed_stories.py", SEED_PROGRAM, fixed)
    show.code(diff if diff else "(no change)")
    show.good("fixes that --fix would apply", applied)
    show.note("Everything else needs a human: each message names the nanguard op that removes the "
              "risk (nanguard.softplus, nanguard.safe_where, nanguard.distance_matrix, nanguard.masked_mean, "
              "nanguard.softmax(mask=)).")
