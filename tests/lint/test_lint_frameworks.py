"""Framework-aware advice: TensorFlow, Keras, JAX and NumPy code is advised in its own words.

A finding in a TensorFlow file names a TF op or `nanguard.tf.<op>`, never a torch one; a
`keras.ops` finding names `keras.ops` (and a fix keeps multi-backend Keras code on
`keras.ops`); JAX and NumPy findings name `jax.nn`, `nanguard.jax.<op>` or `optax`. The words
come from the catalogue (`Hazard.fix_in`), so they are checked against it too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from nanguard.core.hazards import HAZARDS, lint_message
from nanguard.lint import fix_source, lint_source

TF_HEADER = "import tensorflow as tf\n"
KERAS_HEADER = "import keras\nfrom keras import ops\n"
JAX_HEADER = "import jax\nimport jax.numpy as jnp\n"
NUMPY_HEADER = "import numpy as np\n"

TF_CASES = [
    ("NG101", "y = tf.math.log(tf.nn.softmax(x))"),
    ("NG102", "y = tf.math.log(tf.sigmoid(x))"),
    ("NG103", "y = tf.math.log(1 - tf.sigmoid(x))"),
    ("NG104", "y = tf.math.log(1 + tf.exp(x))"),
    ("NG105", "y = tf.math.log(tf.reduce_sum(tf.exp(x), axis=1))"),
    ("NG201", "loss = -tf.reduce_sum(y_ * tf.math.log(y_conv))"),
    ("NG301", "d = tf.sqrt(sq[:, None] + sq[None, :] - 2 * tf.matmul(x, x, transpose_b=True))"),
    ("NG302", "n = tf.sqrt(tf.reduce_sum(x ** 2, axis=-1))"),
    ("NG303", "a = tf.acos(tf.reduce_sum(u * v, axis=-1))"),
    ("NG304", "r = tf.sqrt(tf.abs(x))"),
    ("NG401", "m = tf.reduce_sum(x * k, 1) / tf.reduce_sum(tf.cast(tf.not_equal(ids, 0), tf.float32), 1)"),
    ("NG501", "y = tf.where(x > 0, tf.math.log(x), tf.zeros_like(x))"),
    ("NG601", "loss = -tf.reduce_sum(y_ * tf.math.log(tf.clip_by_value(y_conv, 1e-10, 1.0)))"),
    ("NG602", "p = tf.nn.softmax(tf.clip_by_value(logits, -15.0, 15.0))"),
    ("NG701", "p = tf.nn.softmax(tf.where(pad_mask, scores, float('-inf')))"),
    ("NG901", "e = tf.exp(x)\np = e / tf.reduce_sum(e, -1, keepdims=True)"),
]

KERAS_CASES = [
    ("NG101", "y = ops.log(ops.softmax(x))"),
    ("NG102", "y = keras.ops.log(keras.ops.sigmoid(x))"),
    ("NG103", "y = ops.log(1 - ops.sigmoid(x))"),
    ("NG104", "y = ops.log(1 + ops.exp(x))"),
    ("NG105", "y = ops.log(ops.sum(ops.exp(x), axis=1))"),
    ("NG302", "n = ops.sqrt(ops.sum(x ** 2, axis=-1))"),
    ("NG501", "y = ops.where(x > 0, ops.sqrt(x), 0.0)"),
    ("NG701", "p = ops.softmax(ops.where(pad_mask, scores, float('-inf')))"),
    ("NG901", "e = ops.exp(x)\np = e / ops.sum(e, -1, keepdims=True)"),
]

JAX_CASES = [
    ("NG101", "y = jnp.log(jax.nn.softmax(x))"),
    ("NG501", "y = jnp.where(x > 0, jnp.sqrt(x), 0)"),
    ("NG302", "n = jnp.sqrt(jnp.sum(x**2))"),
    ("NG102", "y = jnp.log(jax.nn.sigmoid(x))"),
    ("NG105", "y = jnp.log(jnp.sum(jnp.exp(x), axis=-1))"),
]

NUMPY_CASES = [
    ("NG901", "p = np.exp(x) / np.sum(np.exp(x))"),
    ("NG104", "y = np.log(1 + np.exp(x))"),
]

_TORCH_WORDS = re.compile(r"torch|\bF\.|nanguard\.(?!tf\.|jax\.)[a-z_]+\(|\bdim\b")


def _findings(header: str, body: str, code: str):
    found = [f for f in lint_source(header + textwrap.dedent(body) + "\n") if f.code == code]
    assert found, f"{code} not found in:\n{body}"
    return found


@pytest.mark.parametrize("code,body", TF_CASES)
def test_tensorflow_findings_name_tensorflow_ops(code, body):
    for f in _findings(TF_HEADER, body, code):
        assert not _TORCH_WORDS.search(f.message), f.message
        if "tf" in HAZARDS[f.hazard].fix_in:  # (NG602's fix, "drop the clamp", names no op at all)
            assert re.search(r"\btf\.|nanguard\.tf\.|\bkeras\b", f.message), f.message
        assert f.message.endswith(HAZARDS[f.hazard].fix_text("tf", **_fields(f)))


@pytest.mark.parametrize("code,body", KERAS_CASES)
def test_keras_ops_findings_name_keras_ops(code, body):
    for f in _findings(KERAS_HEADER, body, code):
        assert not _TORCH_WORDS.search(f.message), f.message
        first_remedy = f.message.split("; fix: ", 1)[1].split(";")[0]
        assert "keras." in first_remedy, f.message
        # Multi-backend code is not sent to TensorFlow (nanguard.tf may be named "on the TensorFlow backend").
        assert not re.search(r"\btf\.", first_remedy), f.message


@pytest.mark.parametrize("code,body", JAX_CASES + NUMPY_CASES)
def test_jax_and_numpy_findings_name_jax(code, body):
    header = JAX_HEADER if "jnp" in body or "jax" in body else NUMPY_HEADER
    for f in _findings(header, body, code):
        assert not _TORCH_WORDS.search(f.message), f.message
        assert re.search(r"jax\.nn\.|nanguard\.jax\.|optax\.", f.message), f.message


def _fields(f) -> dict:
    return {"op": "softmax"} if f.code == "NG701" else {}


def test_jax_norm_advice_names_optax_safe_norm():
    [f] = _findings(JAX_HEADER, "n = jnp.sqrt(jnp.sum(x**2))", "NG302")
    assert "optax.safe_norm" in f.message and "nanguard.jax.norm" in f.message


def test_message_is_the_catalogue_wording_for_the_framework():
    [f] = _findings(TF_HEADER, "y = tf.math.log(tf.nn.softmax(x))", "NG101")
    assert f.message == lint_message(HAZARDS["log_softmax"], "`log(softmax(x))`", "tf")
    assert "tf.nn.log_softmax" in f.message


def test_each_call_is_advised_in_its_own_framework_in_a_mixed_file():
    source = ("import torch\nimport tensorflow as tf\n"
              "a = torch.log(torch.softmax(x, 1))\nb = tf.math.log(tf.nn.softmax(x))\n")
    torch_f, tf_f = lint_source(source)
    assert "F.log_softmax" in torch_f.message and "tf.nn.log_softmax" in tf_f.message
    assert "torch" not in tf_f.message


def test_numpy_has_no_gradient_findings_and_no_torch_only_rules():
    source = NUMPY_HEADER + "a = np.where(x > 0, np.sqrt(x), 0)\nb = np.sqrt(np.sum(x ** 2))\nc = np.std(x, 0)\n"
    assert lint_source(source) == []


KERAS_FIXES = [
    ("keras.ops.log(keras.ops.sigmoid(x))", "ops.log_sigmoid(x)"),  # the file's shortest spelling
    ("ops.log(ops.sigmoid(x))", "ops.log_sigmoid(x)"),
    ("ops.log(1 - ops.sigmoid(x))", "ops.log_sigmoid(-x)"),
    ("ops.log(ops.softmax(x, axis=-1))", "ops.log_softmax(x, axis=-1)"),
    ("ops.log(ops.sum(ops.exp(x), axis=1))", "ops.logsumexp(x, axis=1)"),
]


@pytest.mark.parametrize("before,after", KERAS_FIXES)
def test_keras_fix_stays_multi_backend(before, after):
    fixed, applied, remaining = fix_source(KERAS_HEADER + f"y = {before}\n")
    assert applied == 1 and remaining == []
    assert fixed == KERAS_HEADER + f"y = {after}\n"
    assert "tf." not in fixed


def test_keras_fix_never_writes_tensorflow_even_when_tensorflow_is_imported():
    source = "import tensorflow as tf\nimport keras\ny = keras.ops.log(keras.ops.sigmoid(x))\n"
    fixed, applied, _ = fix_source(source)
    assert applied == 1 and fixed.endswith("y = keras.ops.log_sigmoid(x)\n")


JAX_FIXES = [
    ("jnp.log(jax.nn.softmax(x, axis=-1))", "jax.nn.log_softmax(x, axis=-1)"),
    ("jnp.log(jax.nn.sigmoid(x))", "jax.nn.log_sigmoid(x)"),
    ("jnp.log(jnp.sum(jnp.exp(x), axis=1))", "jax.nn.logsumexp(x, axis=1)"),
]


@pytest.mark.parametrize("before,after", JAX_FIXES)
def test_jax_fixes_run_and_agree(before, after):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    source = JAX_HEADER + f"y = {before}\n"
    fixed, applied, _ = fix_source(source)
    assert applied == 1 and fixed == JAX_HEADER + f"y = {after}\n"
    x = jnp.array([[0.5, -1.0, 2.0], [3.0, 0.0, -2.0]])
    env_before, env_after = {"x": x}, {"x": x}
    exec(compile(source, "<before>", "exec"), env_before)  # noqa: S102  (running the fixed code is the test)
    exec(compile(fixed, "<after>", "exec"), env_after)  # noqa: S102
    assert jnp.allclose(env_before["y"], env_after["y"], atol=1e-6)


def test_numpy_gets_no_fix_to_a_framework_it_does_not_import():
    source = NUMPY_HEADER + "y = np.log(np.sum(np.exp(x), axis=1))\n"
    [f] = lint_source(source)
    assert f.code == "NG105" and f.fix is None


@pytest.mark.slow
def test_keras_fixes_run_on_a_backend_other_than_tensorflow(tmp_path):
    """The fixed Keras code runs on the JAX backend (it was not locked to tf) and agrees with the original."""
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    body = "y1 = ops.log(ops.sigmoid(x))\ny2 = ops.log(1 - ops.sigmoid(x))\ny3 = ops.log(ops.softmax(x, axis=-1))\n"
    fixed, applied, _ = fix_source(KERAS_HEADER + body)
    assert applied == 3 and "tf." not in fixed
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        x = np.array([[-3.0, 0.0, 2.0]])
        before, after = {{"x": x}}, {{"x": x}}
        exec({KERAS_HEADER + body!r}, before)
        exec({fixed!r}, after)
        import keras
        assert keras.backend.backend() == "jax"
        for k in ("y1", "y2", "y3"):
            assert np.allclose(np.asarray(before[k]), np.asarray(after[k]), atol=1e-6), k
        after["x"] = np.array([[-200.0, 0.0, 200.0]])
        exec({fixed!r}, after)
        assert all(np.isfinite(np.asarray(after[k])).all() for k in ("y1", "y2", "y3"))
    """))
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
