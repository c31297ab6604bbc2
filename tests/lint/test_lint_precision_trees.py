"""Precision on 20 real trees (issue 12): shapes that were default-set findings and are not risks.

Each negative is cut down from a finding read in context on transformers, diffusers, timm,
torch, jax, keras, tensorflow-probability, tensorflow-addons, tensorflow/examples, keras-hub
or fairseq, and judged harmless (the hazard cannot happen for the inputs the code accepts,
or the code is never differentiated) or false (the rule misread the code). Each positive
keeps the risk, so that a negative is not silent by accident.
"""

from __future__ import annotations

import textwrap

import pytest

from nanguard.lint import lint_source

HEADER = ("import math\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
          "import torch.nn.functional as F\nimport tensorflow as tf\nimport jax\nimport jax.numpy as jnp\n")


def _codes(body: str, confidence: str = "certain") -> list[str]:
    return [f.code for f in lint_source(HEADER + textwrap.dedent(body), confidence=confidence)]


NEGATIVES = [
    # tensorflow-probability: statistics undefined on part of the domain return NaN/inf there by
    # design, so the where's result is non-finite exactly where it discards the singular branch.
    ("NG501", """\
        def _mean(self):
            concentration = tf.convert_to_tensor(self.concentration)
            mean = self.scale / (concentration - 1.)
            return tf.where(concentration > 1., mean, dtype_util.as_numpy_dtype(self.dtype)(np.nan))
    """),
    ("NG501", """\
        def _variance(self):
            c = tf.convert_to_tensor(self.concentration)
            return tf.where(c > 2., self.scale ** 2 * c / ((c - 1.) ** 2 * (c - 2.)), numpy_dtype(np.inf))
    """),
    ("NG501", """\
        def _stddev(self, conc):
            g2 = tf.exp(tf.math.lgamma(1. - 2. * conc))
            return tf.where(conc < 0.5, g2, tf.fill(tf.shape(conc), tf.constant(np.inf, self.dtype)))
    """),
    ("NG501", "y = torch.where(c > 1, s / (c - 1), torch.full_like(c, float('nan')))\n"),
]

POSITIVES = [
    ("NG501", """\
        def _mean(self):
            concentration = tf.convert_to_tensor(self.concentration)
            mean = self.scale / (concentration - 1.)
            return tf.where(concentration > 1., mean, dtype_util.as_numpy_dtype(self.dtype)(0.))
    """),
    ("NG501", "y = torch.where(c > 1, s / (c - 1), torch.full_like(c, 0.0))\n"),
]


@pytest.mark.parametrize("code,body", NEGATIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEGATIVES)])
def test_harmless_in_context_is_not_a_finding(code, body):
    assert code not in _codes(body, "all"), f"{code} should not fire on:\n{body}"


@pytest.mark.parametrize("code,body", POSITIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POSITIVES)])
def test_the_risk_kept_is_still_a_default_finding(code, body):
    assert code in _codes(body), f"{code} should fire on:\n{body}"
