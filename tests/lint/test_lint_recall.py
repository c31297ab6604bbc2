"""Recall on the NaN bug shapes of public reports that the linter used to miss.

Each is a positive test in the spelling it was reported in (ArcFace, allennlp, hand-written
Keras BCE, TF norms...); where a fix is offered, the fixed code is executed.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from nanguard.lint import fix_source, lint_source

HEADER = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport tensorflow as tf\n"
          "from tensorflow.keras import backend as K\nimport keras\nimport numpy as np\nimport jax.numpy as jnp\n")

MISSED = [
    ("NG303", "theta = torch.acos(F.linear(F.normalize(x), F.normalize(W)))"),       # ArcFace
    ("NG501", "y = torch.where(b, a / 0, c)"),
    ("NG201", "h = -(torch.exp(logps) * logps).sum()"),
    ("NG201", "def bce(y_true, y_pred):\n    return -K.mean(y_true * K.log(y_pred) + (1 - y_true) * K.log(1 - y_pred))"),
    ("NG201", "def bce(y_true, y_pred):\n"
              "    return -keras.ops.mean((1 - y_true) * keras.ops.log(1 - y_pred))"),
    ("NG201", "loss = F.nll_loss(torch.log(p), y)"),
    ("NG201", "loss = nn.NLLLoss()(torch.log(p), y)"),
    ("NG701", "def masked_log_softmax(vector, mask):\n    vector = vector + mask.log()\n"
              "    return F.log_softmax(vector, dim=-1)"),
    ("NG401", "loss = loss / num_label_tokens"),
    ("NG103", "y = torch.log(torch.tensor(1.) - torch.sigmoid(x))"),
    ("NG304", "sin = torch.sqrt(1 - cos**2)"),
    ("NG302", "n = tf.norm(x)"),
    ("NG302", "n = tf.norm(x, axis=-1)"),
    ("NG302", "n = keras.ops.norm(x)"),
    ("NG302", "n = jnp.linalg.norm(x)"),
    ("NG901", "p = np.exp(x) / np.sum(np.exp(x))"),
    ("NG104", "y = np.log(1 + np.exp(x))"),
    ("NG501", "y = jnp.where(x > 0, jnp.sqrt(x), 0)"),
]


@pytest.mark.parametrize("code,body", MISSED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(MISSED)])
def test_reported_bug_shapes_are_found(code, body):
    codes = [f.code for f in lint_source(HEADER + textwrap.dedent(body) + "\n")]
    assert code in codes, f"{code} missed on:\n{body}"


NEAR_MISSES = [
    ("NG302", "n = torch.norm(x)"),                    # torch's norms have gradient 0 at the zero vector
    ("NG302", "n = tf.norm(x, ord=1)"),                # a finite subgradient at 0
    ("NG302", "n = tf.norm(x + 1e-6)"),
    ("NG201", "h = -(torch.exp(logps) * other).sum()"),
    ("NG701", "def f(vector, mask):\n    vector = vector + mask.float()\n    return F.log_softmax(vector, dim=-1)"),
    ("NG304", "s = torch.sqrt(1 + cos**2)"),
    ("NG501", "y = torch.where(b, a / 2, c)"),
]


@pytest.mark.parametrize("code,body", NEAR_MISSES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEAR_MISSES)])
def test_their_safe_neighbours_are_not(code, body):
    codes = [f.code for f in lint_source(HEADER + textwrap.dedent(body) + "\n")]
    assert code not in codes, f"{code} should not fire on:\n{body}"


def test_one_minus_sigmoid_of_a_tensor_literal_is_fixed_and_runs():
    source = "import torch\nimport torch.nn.functional as F\ny = torch.log(torch.tensor(1.) - torch.sigmoid(x))\n"
    fixed, applied, _ = fix_source(source)
    assert applied == 1 and fixed.endswith("y = F.logsigmoid(-x)\n")
    x = torch.tensor([-3.0, 0.0, 5.0, 200.0])
    before, after = {"x": x}, {"x": x}
    exec(compile(source, "<before>", "exec"), before)  # noqa: S102  (running the fixed code is the test)
    exec(compile(fixed, "<after>", "exec"), after)  # noqa: S102
    torch.testing.assert_close(after["y"][:3], before["y"][:3])
    assert torch.isfinite(after["y"]).all() and not torch.isfinite(before["y"]).all()
