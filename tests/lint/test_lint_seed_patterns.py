"""The seed stories' anti-patterns (/work/shared/seeds 003, 004 and the stories they cite):
each is found on its line, by default where its rule is certain, with `--confidence all` where
the README says the rule is possible (masks and counts: whether they can be empty is the
data's), and each fixed spelling is clean in every mode (issue 28)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from nanguard.lint import lint_source
from nanguard.lint.rules import RULES

REPO = Path(__file__).resolve().parents[2]

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


# Every seed pattern is found in the default mode. NG601/NG602 (clipping) make no NaN: their seed
# spellings (a clip to exactly [eps, 1], logits clamped on both sides) are certain, the one-sided
# clamp many real fixes use is possible (tests/lint/test_lint_precision.py).
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


def test_every_seed_rule_is_in_the_default():
    assert {code for _, code, _, _ in SEEDS} == DEFAULT
    assert DEFAULT <= set(RULES)


# Each example spelling of the README's table (the Pattern column's code spans), as code that
# has it. Parts of a spelling, not spellings of their own: "then `softmax`", "without `- max`".
QUALIFIERS = {"NG701": {"softmax"}, "NG901": {"- max"}}
EXAMPLES: dict[tuple[str, str], list[str]] = {
    ("NG101", "log(softmax(x))"): ["def f(x):\n    return torch.log(torch.softmax(x, dim=-1))  # <-"],
    ("NG101", "log(softmax(x).gather(1, y))"): [
        "def f(x, y):\n    return -torch.log(torch.softmax(x, dim=-1).gather(1, y[:, None])).mean()  # <-",
        "def f(x, y):\n    p = F.softmax(x, dim=-1)\n    return -p[torch.arange(len(y)), y].log().mean()  # <-",
    ],
    ("NG102", "log(sigmoid(x))"): ["def f(x):\n    return torch.log(torch.sigmoid(x))  # <-"],
    ("NG103", "log(1 - sigmoid(x))"): ["def f(x):\n    return torch.log(1 - torch.sigmoid(x))  # <-"],
    ("NG103", "log1p(-sigmoid(x))"): ["def f(x):\n    return torch.log1p(-torch.sigmoid(x))  # <-"],
    ("NG103", "log(1 - tanh(x)**2)"): [
        "def f(u):\n    a = torch.tanh(u)\n    return torch.log(1 - a.pow(2)).sum(-1)  # <-"],
    ("NG103", "log1p(-exp(logps))"): [
        "def f(chosen_logps, rejected_logps):\n"
        "    return torch.log1p(-torch.exp(chosen_logps)) - rejected_logps  # <-",
    ],
    ("NG103", "log(1 - exp(x))"): [
        "def marginal_lambda(log_alpha):\n"
        "    return log_alpha - 0.5 * torch.log(1. - torch.exp(2. * log_alpha))  # <-",
    ],
    ("NG104", "log1p(exp(x))"): ["def f(x):\n    return torch.log1p(torch.exp(x))  # <-"],
    ("NG104", "log(1 + exp(x))"): ["def f(x):\n    return torch.log(1 + torch.exp(x))  # <-"],
    ("NG104", "x.exp().log1p()"): ["def f(x):\n    return x.exp().log1p()  # <-"],
    ("NG105", "log(sum(exp(x)))"): ["def f(x):\n    return torch.log(torch.sum(torch.exp(x), dim=-1))  # <-"],
    ("NG201", "-sum(y * log(p))"): [
        "def f(y, p):\n    return -torch.sum(y * torch.log(p))  # <-",
        "def f(y_, y_conv):\n    return -tf.reduce_sum(y_ * tf.math.log(y_conv))  # <-",
    ],
    ("NG201", "(p * p.log()).sum()"): ["def entropy(p):\n    return -(p * p.log()).sum(-1)  # <-"],
    ("NG201", "nll_loss(log(p), y)"): ["def f(p, y):\n    return nll_loss(torch.log(p), y)  # <-"],
    ("NG201", "kl_div(q.log(), p)"): ["def f(q, p):\n    return F.kl_div(q.log(), p, reduction='batchmean')  # <-"],
    ("NG106", "torch.exp(0.5 * logvar)"): [
        "def f(h, fc_mu, fc_logvar):\n    mu, logvar = fc_mu(h), fc_logvar(h)\n"
        "    return mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)  # <-",
    ],
    ("NG106", "log_sigma.exp()"): ["def f(mu, log_sigma):\n    return mu + log_sigma.exp() * torch.randn_like(mu)  # <-"],
    ("NG301", "sqrt(a² + b² - 2·a@b.T)"): [
        "def f(a, b):\n    a2 = (a * a).sum(-1)[:, None]\n    b2 = (b * b).sum(-1)[None, :]\n"
        "    return torch.sqrt(a2 + b2 - 2 * a @ b.T)  # <-",
    ],
    ("NG302", "sqrt((x**2).sum(dim))"): ["def f(x):\n    return torch.sqrt((x**2).sum(-1))  # <-"],
    ("NG302", "sqrt(((a - b)**2).sum(dim))"): [
        "def f(a, b):\n    return torch.sqrt(((a - b)**2).sum(-1))  # <-",
        "def f(a, b):\n    d = a - b\n    return torch.sqrt((d * d).sum(-1))  # <-",
    ],
    ("NG302", "sqrt(((pos[i] - pos[j])**2).sum(-1))"): [
        "def f(pos, edge_index):\n    j, i = edge_index\n    return torch.sqrt(((pos[i] - pos[j])**2).sum(-1))  # <-",
        "def f(R, idx_i, idx_j):\n    d = tf.gather(R, idx_i) - tf.gather(R, idx_j)\n"
        "    return tf.sqrt(tf.reduce_sum(d**2, -1))  # <-",
    ],
    ("NG104", "log1p(exp(self.rho))"): [
        "class BayesLinear(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.rho = nn.Parameter(torch.full((n,), -3.0))\n\n    def forward(self, x):\n"
        "        return x * torch.log1p(torch.exp(self.rho))  # <-",
    ],
    ("NG302", "sqrt(dx**2 + dy**2)"): ["def f(dx, dy):\n    return torch.sqrt(dx**2 + dy**2)  # <-"],
    ("NG303", "acos(cosine)"): [
        "def f(a, b):\n    return torch.acos(F.cosine_similarity(a, b, dim=-1))  # <-",
        "def f(cosine):\n    return torch.acos(cosine)  # <-",
    ],
    ("NG303", "acos(cosine_similarity(a, b))"): [
        "def f(a, b):\n    return torch.acos(F.cosine_similarity(a, b, dim=-1))  # <-"],
    ("NG303", "asin(dot)"): [
        "def f(u, v):\n    dot = (u * v).sum(-1)\n    return torch.asin(dot)  # <-",
        "def f(dot):\n    return torch.asin(dot)  # <-",
    ],
    ("NG304", "tf.nn.relu(x) ** 0.5"): [
        "def f(x):\n    return tf.nn.relu(x) ** 0.5  # <-",
        "def f(x):\n    return tf.sqrt(tf.nn.relu(x))  # <-",
    ],
    ("NG304", "norm(a - b) ** 0.5"): ["def f(a, b):\n    return torch.norm(a - b, dim=-1) ** 0.5  # <-"],
    ("NG304", "mask.sum(-1) ** -0.5"): ["def f(x, mask):\n    return x * mask.sum(-1) ** -0.5  # <-"],
    ("NG304", "sqrt(1 - cosine_similarity(a, b)**2)"): [
        "def f(a, b):\n    return torch.sqrt(1 - F.cosine_similarity(a, b) ** 2)  # <-",
        "def f(x, w):\n    cosine = F.linear(F.normalize(x), F.normalize(w))\n"
        "    return torch.sqrt(1.0 - torch.pow(cosine, 2))  # <-",
    ],
    ("NG304", "abs(x) ** 0.5"): ["def f(x):\n    return torch.abs(x) ** 0.5  # <-"],
    ("NG304", "x.var(dim) ** 0.5"): ["def f(x):\n    return x.var(dim=-1) ** 0.5  # <-"],
    ("NG401", "2 * (p * t).sum() / (p.sum() + t.sum())"): [
        "def f(logits, t):\n    p = torch.sigmoid(logits)\n    return 2 * (p * t).sum() / (p.sum() + t.sum())  # <-",
    ],
    ("NG401", "x / mask.sum()"): ["def f(x, mask):\n    return (x * mask).sum() / mask.sum()  # <-"],
    ("NG401", "s / lengths"): [
        "def f(x, seqs):\n    lengths = torch.tensor([len(q) for q in seqs])\n    s = x.sum(1)\n"
        "    return s / lengths  # <-",
        "def f(x, batch):\n    s = x.sum(1)\n    return s / batch.lengths  # <-",
    ],
    ("NG401", "/ len(x[mask])"): ["def f(x, mask):\n    return x[mask].sum() / len(x[mask])  # <-"],
    ("NG501", "where(cond, f(x), y)"): [
        "def f(x):\n    return torch.where(x > 0, torch.log(x), torch.zeros_like(x))  # <-",
    ],
    ("NG601", "log(clip(p, 1e-10, 1))"): [
        "def f(y_, y_conv):\n    return -tf.reduce_sum(y_ * tf.math.log(tf.clip_by_value(y_conv, 1e-10, 1.0)))  # <-",
    ],
    ("NG601", "log(p.clamp(min=eps))"): [
        "def f(logits, eps=1e-8):\n    p = torch.softmax(logits, -1)\n    return torch.log(p.clamp(min=eps))  # <-",
    ],
    ("NG601", "log(clip(p, eps, 1 - eps))"): [
        "def f(y, p, eps=1e-7):\n    return -tf.reduce_sum(y * tf.math.log(tf.clip_by_value(p, eps, 1 - eps)))  # <-",
    ],
    ("NG602", "softmax(clamp(logits, -15, 15))"): [
        "def f(logits):\n    return torch.softmax(torch.clamp(logits, -15, 15), dim=-1)  # <-",
    ],
    ("NG602", "softmax(logits.clamp(max=c))"): [
        "def f(logits, c=50.0):\n    return torch.softmax(logits.clamp(max=c), dim=-1)  # <-",
    ],
    ("NG701", "masked_fill(mask, -inf)"): [
        "def f(scores, mask):\n    scores = scores.masked_fill(mask, float('-inf'))\n"
        "    return torch.softmax(scores, dim=-1)  # <-",
    ],
    ("NG801", "def f(x): x.std(0)"): ["def f(x):\n    return (x - x.mean(0)) / x.std(0)  # <-"],
    ("NG801", "def f(x): torch.var(x, dim=0)"): ["def f(x):\n    return torch.var(x, dim=0)  # <-"],
    ("NG801", "data.std(0)"): ["def f(path):\n    data = torch.load(path)\n    return data / data.std(0)  # <-"],
    ("NG901", "exp(x) / exp(x).sum(dim)"): [
        "def f(x):\n    return torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)  # <-",
    ],
}


def _readme_table(header: str) -> set[tuple[str, str]]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index(header):]
    table = table[:table.index("\n\n")]
    found = set()
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        code = cells[0].split()[0]
        for span in re.findall(r"`([^`]+)`", cells[1]):
            if span not in QUALIFIERS.get(code, ()):
                found.add((code, span))
    return found


# The README's second table: spellings the default leaves to `--confidence all` (rules possible
# by nature where the data decides whether a vector is 0, a dimension has one row, a
# log-variance passes 88, and the clamps real fixes use).
POSSIBLE_SPELLINGS = _readme_table("| Code | Pattern (possible) |")
DEFAULT_SPELLINGS = _readme_table("| Code | Pattern (reported by default) |")


def test_the_examples_are_the_readme_table():
    assert DEFAULT_SPELLINGS | POSSIBLE_SPELLINGS == set(EXAMPLES)
    assert not DEFAULT_SPELLINGS & POSSIBLE_SPELLINGS


@pytest.mark.parametrize("key", sorted(EXAMPLES), ids=[f"{c}:{s}" for c, s in sorted(EXAMPLES)])
def test_every_readme_spelling_is_found(key):
    code = key[0]
    for program in EXAMPLES[key]:
        line, everything = _found(program, "all")
        assert (line, code) in everything, program
    default = all((_found(p, "certain")[0], code) in _found(p, "certain")[1] for p in EXAMPLES[key])
    assert default == (key not in POSSIBLE_SPELLINGS), key


def test_rules_with_default_spellings_say_so():
    # Rules possible by nature whose README spellings are in the default set are listed as
    # "both" and say when they are certain (`--list-rules`, `--explain`).
    from nanguard.lint.output import explain, rule_table
    mixed = {code for code, _ in DEFAULT_SPELLINGS if RULES[code].confidence != "certain"}
    assert mixed == {c for c, r in RULES.items() if r.certain_when}
    table = {line.split()[0]: line.split()[2 if "[*]" not in line else 3] for line in rule_table().splitlines()}
    assert all(table[c] == "both" for c in mixed)
    assert all("certain for" in explain(RULES[c]) for c in mixed)
