"""The seed stories' anti-patterns (/work/shared/seeds 003, 004 and the stories they cite):
each is found on its line, by default where its rule is certain, with `--confidence all` where
the README says the rule is possible (masks and counts: whether they can be empty is the
data's), and each fixed spelling is clean in every mode (issue 28)."""

from __future__ import annotations

import textwrap

import pytest

from nanguard.lint import lint_source
from nanguard.lint.rules import RULES

HEADER = ("import math\nimport torch\nimport torch.nn.functional as F\nimport tensorflow as tf\n"
          "from torch.nn.functional import nll_loss\n")

SEEDS = [
    ("seed 003: cross-entropy by hand", "NG201",
     "def loss(y_, y_conv):\n    return -tf.reduce_sum(y_ * tf.math.log(y_conv))  # <-",
     "def loss(y_, x):\n    y = tf.nn.log_softmax(x)\n    return -tf.reduce_sum(y_ * y)"),
    ("seed 003: cross-entropy of a softmax", "NG101",
     "def loss(y_, x):\n    y_conv = tf.nn.softmax(x)\n    return -tf.reduce_sum(y_ * tf.math.log(y_conv))  # <-",
     "def loss(y_, x):\n    return tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=x))"),
    ("seed 003: mean pooling over a count of tokens", "NG401",
     "def pool(embedded, input, pad):\n"
     "    return tf.reduce_sum(embedded) / tf.reduce_sum(tf.not_equal(input, pad))  # <-",
     "def pool(embedded, input, pad):\n"
     "    n = tf.reduce_sum(tf.cast(tf.not_equal(input, pad), tf.float32), axis=1, keepdims=True)\n"
     "    n = tf.where(tf.greater(n, 0.0), n, tf.ones(tf.shape(n)))\n"
     "    return tf.reduce_sum(embedded, 1) / n"),
    ("mean pooling divided by reduce_sum(mask)", "NG401",
     "def pool(x, mask):\n    return tf.reduce_sum(x * mask, 1) / tf.reduce_sum(mask, 1)  # <-",
     "def pool(x, mask):\n    return tf.reduce_sum(x * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)"),
    ("mean pooling divided by mask.sum()", "NG401",
     "def pool(x, mask):\n    return (x * mask).sum(1) / mask.sum(1)  # <-",
     "def pool(x, mask):\n    return (x * mask).sum(1) / mask.sum(1).clamp(min=1)"),
    ("seed 003: log of a clipped probability", "NG601",
     "def loss(y_, y_conv):\n    return -tf.reduce_sum(y_ * tf.math.log(tf.clip_by_value(y_conv, 1e-10, 1.0)))  # <-",
     "def loss(y_, logits):\n    return -tf.reduce_sum(y_ * tf.nn.log_softmax(logits))"),
    ("torch: log of a clamped softmax", "NG601",
     "def loss(y, logits):\n    probs = torch.softmax(logits, -1)\n"
     "    return -(y * torch.log(torch.clamp(probs, 1e-7, 1.0))).sum(-1)  # <-",
     "def loss(y, logits):\n    return -(y * torch.log_softmax(logits, -1)).sum(-1)"),
    ("seed 004: clipped logits before softmax", "NG602",
     "def probabilities(logits):\n    safe_logits = tf.clip_by_value(logits, -15.0, 15.0)\n"
     "    return tf.nn.softmax(logits=safe_logits, name='Softmax')  # <-",
     "def probabilities(logits):\n    return tf.nn.softmax(logits=logits, name='Softmax')"),
    ("seed 004 in torch: clamped logits before softmax", "NG602",
     "def probabilities(logits):\n    return torch.softmax(logits.clamp(-15, 15), -1)  # <-",
     "def log_probabilities(logits):\n    return torch.logsumexp(logits, -1, keepdim=True) - logits"),
    ("-inf mask then softmax over a row that can be fully masked", "NG701",
     "def attend(scores, keep):\n    scores = scores.masked_fill(~keep, float('-inf'))\n"
     "    return torch.softmax(scores, -1)  # <-",
     "def attend(scores, keep):\n    scores = scores.masked_fill(~keep, float('-inf'))\n"
     "    attn = torch.softmax(scores, -1)\n"
     "    return torch.where(keep.any(-1, keepdim=True), attn, torch.zeros_like(attn))"),
    ("-inf mask then softmax, the row guarded before the fill", "NG701",
     "def attend(scores, keep):\n    return torch.softmax(torch.where(keep, scores, -torch.inf), -1)  # <-",
     "def attend(scores, keep):\n    keep = keep | ~keep.any(-1, keepdim=True)\n"
     "    return torch.softmax(torch.where(keep, scores, -torch.inf), -1)"),
    ("acos of a cosine computed by hand", "NG303",
     "def angle(a, b):\n    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))\n    return torch.acos(cos)  # <-",
     "def angle(a, b, eps=1e-7):\n    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))\n"
     "    return torch.acos(torch.clamp(cos, -1 + eps, 1 - eps))"),
    ("acos of a dot product of normalised vectors", "NG303",
     "def angle(a, b):\n    return torch.acos((F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1))  # <-",
     "def angle(a, b):\n    return torch.atan2(torch.linalg.cross(a, b).norm(dim=-1), (a * b).sum(-1))"),
]


# The rules a seed pattern is found by in the default mode; the others report it as possible.
DEFAULT = {"NG101", "NG201", "NG303", "NG401", "NG601", "NG602", "NG701"}


def _found(program: str, confidence: str) -> tuple[int, list[tuple[int, str]]]:
    source = HEADER + textwrap.dedent(program) + "\n"
    line = next(i for i, text in enumerate(source.splitlines(), 1) if text.endswith("# <-"))
    return line, [(f.line, f.code) for f in lint_source(source, "model.py", confidence=confidence)]


@pytest.mark.parametrize("story,code,broken,fixed", SEEDS, ids=[s[0] for s in SEEDS])
def test_seed_pattern_is_found_on_its_line(story, code, broken, fixed):
    line, everything = _found(broken, "all")
    assert (line, code) in everything, story
    line, default = _found(broken, "certain")
    assert ((line, code) in default) == (code in DEFAULT), story


@pytest.mark.parametrize("story,code,broken,fixed", SEEDS, ids=[s[0] for s in SEEDS])
def test_its_fixed_spelling_is_clean(story, code, broken, fixed):
    found = lint_source(HEADER + textwrap.dedent(fixed) + "\n", "model.py", confidence="all")
    assert [f.format() for f in found] == []


def test_the_default_rules_are_the_certain_ones():
    assert DEFAULT <= {c for c, r in RULES.items() if r.confidence == "certain"} | {"NG303"}
