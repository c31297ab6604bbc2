"""The code of the seed stories, as their authors wrote it, and what the linter says about it.

Each broken program must be reported with the rule that names its bug; each "fixed"
version that really is correct must be clean.
"""

from __future__ import annotations

import nanguard.stories
from nanguard.lint import lint_source


def _codes(source: str) -> list:
    return sorted(f.code for f in lint_source(source))


def test_seed_000_softplus_by_hand_and_where_on_inf():
    source = '''\
import torch

x = torch.tensor([0., 1., 100.], requires_grad=True)
y0 = x.exp().log1p()
exp = x.exp()
y = x.where(torch.isinf(exp), exp.log1p())  # Replace infs with x
'''
    found = lint_source(source)
    by_line = {(f.line, f.code) for f in found}
    assert (4, "NG104") in by_line          # x.exp().log1p() overflows
    assert (6, "NG501") in by_line          # the where does not stop the NaN gradient


def test_seed_001_distance_matrix_via_gram():
    """The founding story, read from its one copy in nanguard.stories (the file the demo and
    the detector tests run): the sqrt of the Gram expansion is NG301, the fix is clean."""
    story = nanguard.stories.get("distance_matrix")
    found = lint_source(story.source("nan"), str(story.path("nan")), module=story.module("nan"))
    assert [(f.line, f.code) for f in found] == [(story.line("torch.sqrt("), "NG301")]
    assert lint_source(story.source("fixed"), str(story.path("fixed")), module=story.module("fixed")) == []


def test_seed_003_tensorflow_cross_entropy_variants():
    naive = "import tensorflow as tf\ncross_entropy = -tf.reduce_sum(y_*tf.log(y_conv))\n"
    clipped = ("import tensorflow as tf\n"
               "cross_entropy = -tf.reduce_sum(y_*tf.log(tf.clip_by_value(y_conv,1e-10,1.0)))\n")
    log_softmax = "import tensorflow as tf\ny = tf.nn.log_softmax(x)\ncross_entropy = -tf.reduce_sum(y_*y)\n"
    assert _codes(naive) == ["NG201"]
    assert _codes(clipped) == ["NG601"]
    assert _codes(log_softmax) == []


def test_seed_003_softmax_then_log_is_named_log_softmax():
    source = "import tensorflow as tf\ny_conv = tf.nn.softmax(x)\nce = -tf.reduce_sum(y_*tf.log(y_conv))\n"
    assert _codes(source) == ["NG101"]


def test_seed_003_single_and_double_where():
    single = '''\
import tensorflow as tf

def f(x):
    x_ok = tf.not_equal(x, 0.)
    f = lambda x: 1. / x
    safe_f = tf.zeros_like
    return tf.where(x_ok, f(x), safe_f(x))
'''
    double = '''\
import tensorflow as tf

def safe_f(x):
    x_ok = tf.not_equal(x, 0.)
    f = lambda x: 1. / x
    safe_f = tf.zeros_like
    safe_x = tf.where(x_ok, x, tf.ones_like(x))
    return tf.where(x_ok, f(safe_x), safe_f(x))
'''
    assert _codes(single) == ["NG501"]
    assert _codes(double) == []


def test_seed_003_double_where_cross_entropy_is_clean():
    source = '''\
import tensorflow as tf

def cross_entropy(x, y, axis=-1):
    safe_y = tf.where(tf.equal(x, 0.), tf.ones_like(y), y)
    return -tf.reduce_sum(x * tf.log(safe_y), axis)
'''
    assert _codes(source) == []


def test_seed_003_stable_logistic_loss_from_tf_source_is_clean():
    source = '''\
import tensorflow as tf

def loss(logits, labels):
    zeros = tf.zeros_like(logits, dtype=logits.dtype)
    cond = (logits >= zeros)
    relu_logits = tf.where(cond, logits, zeros)
    neg_abs_logits = tf.where(cond, -logits, logits)
    return tf.add(relu_logits - logits * labels, tf.math.log1p(tf.exp(neg_abs_logits)))
'''
    assert _codes(source) == []


def test_seed_003_mean_pooling_division_and_its_fix():
    broken = "import tensorflow as tf\navg = tf.reduce_sum(embedded)/tf.reduce_sum(tf.not_equal(input, pad))\n"
    fixed = '''\
import tensorflow as tf

def pool(embedded, input, pad):
    sum_embedding = tf.reduce_sum(embedded, 1)
    embedding_length = tf.reduce_sum(tf.cast(tf.not_equal(input, pad), dtype=tf.float32), axis=1, keep_dims=True)
    embedding_length_smoothed = tf.where(tf.greater(embedding_length, 0.0), embedding_length,
                                         tf.ones(tf.shape(embedding_length)))
    return sum_embedding / embedding_length_smoothed
'''
    assert _codes(broken) == ["NG401"]
    assert _codes(fixed) == []


def test_seed_003_nan_gradient_replacement_is_not_flagged():
    # Replacing NaN gradients after the fact is a recovery step, not a differentiated where.
    source = ("import tensorflow as tf\n"
              "grads2 = [(tf.where(tf.is_nan(grad), tf.zeros(grad.shape), grad), var) for grad, var in grads]\n")
    assert _codes(source) == []


def test_seed_004_clipping_logits_before_softmax():
    source = '''\
import tensorflow as tf

logits = tf.debugging.check_numerics(logits, message='logits', name=None)
safe_logits = tf.clip_by_value(logits, -15.0, 15.0)
probabilities = tf.nn.softmax(logits=safe_logits, name='Softmax')
'''
    assert _codes(source) == ["NG602"]
