"""The demo's TensorFlow section and its story programs (seeds 003 and 004, nanguard.stories).

The programs are real: run plainly they go NaN; under ``nanguard.tf.detect`` the report names
the story's own line; the fixed versions train clean. The section prints those real numbers
and lines (the tests compute the expected ones from the story files, not from the printout).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

import nanguard.stories
import nanguard.tf as ngt
from nanguard.demo import SECTIONS, Show

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XENT = nanguard.stories.get("tf_cross_entropy")
SOFTMAX = nanguard.stories.get("tf_softmax")
XENT_LINE = XENT.line("cross_entropy = -tf.reduce_sum(")
WHERE_LINE = SOFTMAX.line("return tf.where(h_ok, 1.0 / h")
GRADIENT_LINE = SOFTMAX.line("grads = tape.gradient(")


def _main(story, version, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = importlib.import_module(story.module(version)).main(*args, **kwargs)
    return result, out.getvalue()


@pytest.fixture(scope="module")
def section_text() -> str:
    from nanguard.demo import tf_stories
    out = io.StringIO()
    tf_stories.run(Show(out))
    return out.getvalue()


def test_tf_sections_come_after_the_torch_ones():
    assert SECTIONS.index("nanguard.demo.tf_stories") > SECTIONS.index("nanguard.demo.lint")
    assert SECTIONS.index("nanguard.demo.jax_stories") == SECTIONS.index("nanguard.demo.tf_stories") + 1
    assert (XENT.framework, SOFTMAX.framework) == ("tensorflow", "tensorflow")


def test_cross_entropy_story_is_nan_found_at_its_log_and_fixed_by_log_softmax():
    loss, printed = _main(XENT, "nan", 2)
    assert math.isnan(loss) and "step 1: loss nan" in printed
    with ngt.detect(mode="record") as d:
        _main(XENT, "nan", 1)
    r = d.report
    assert (r.file, r.line, r.phase, r.op, r.what) == (str(XENT.path("nan")), XENT_LINE, "forward", "Log", "-Inf")
    assert "softmax" in r.explanation and "log_softmax" in r.suggestion
    with ngt.detect() as d:
        loss, printed = _main(XENT, "fixed", 3)
    assert d.report is None and math.isfinite(loss) and printed.count("step") == 3


def test_softmax_story_fails_check_numerics_late_and_detect_names_the_single_where():
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad probabilities : Tensor had NaN values"):
        _main(SOFTMAX, "nan", 3)
    with ngt.detect(mode="record", check="nan") as d:   # record: the run goes on, so stop before step 3
        _main(SOFTMAX, "nan", 2)
    r = d.report
    assert (r.file, r.line, r.phase, r.op, r.kind) == (str(SOFTMAX.path("nan")), WHERE_LINE, "backward", "RealDiv",
                                                       "nan")
    assert r.call_line == GRADIENT_LINE and r.function == "inverse"
    with ngt.detect(mode="record") as d:         # "both": the +inf of 1/h that the where hides
        _main(SOFTMAX, "nan", 2)
    assert (d.report.line, d.report.phase, d.report.what) == (WHERE_LINE, "forward", "+Inf")
    with ngt.detect() as d:
        loss, _ = _main(SOFTMAX, "fixed", 3)
    assert d.report is None and math.isfinite(loss)


def test_softmax_story_guarded_skips_exactly_the_bad_batch():
    optimizer = ngt.GuardedOptimizer(keras.optimizers.SGD(0.1))
    loss, printed = _main(SOFTMAX, "nan", 3, optimizer=optimizer)
    assert math.isfinite(loss) and printed.count("step") == 3
    assert optimizer.records.bad_steps == [2] and optimizer.records.skipped == 1


def test_section_prints_the_seed_003_numbers_and_the_log_line(section_text):
    text = section_text
    assert "TensorFlow: seed stories 003 and 004" in text
    assert f"{XENT.module('nan')}: loss per step: nan, nan, nan" in text
    assert f"nanguard.tf.detect: forward of Log (-Inf, op Log) at tf_cross_entropy_nan.py:{XENT_LINE}" in text
    assert f"{XENT_LINE} │ cross_entropy = -tf.reduce_sum(y_ * tf.math.log(y_conv))" in text
    assert "log(clip_by_value(y_conv, 1e-10, 1.0)): loss 23.0259, gradient [0, 0, 0]" in text
    assert "tf.nn.log_softmax(logits): loss 150.0000, gradient [1, -1," in text
    assert "-tf.reduce_sum(y_ * tf.math.log(y_conv)): nan" in text
    assert "nanguard.tf.cross_entropy_probs(y_, y_conv): 1.2060" in text
    assert "-tf.reduce_sum(p * tf.math.log(p)): nan, gradient [1.30258512, 0.60943794, nan, -0.64332503]" in text
    assert ("nanguard.tf.entropy(p): 0.80181855, gradient [1.30258512, 0.60943794, 0.00000000, -0.64332503]"
            in text)


def test_section_prints_the_seed_004_story_detect_fix_and_guard(section_text):
    text = section_text
    assert "then at step 3, InvalidArgumentError: bad probabilities : Tensor had NaN values" in text
    assert "tf.math.log(x) at x = 0.001: -6.907755, gradient 999.99994" in text
    assert "tf.clip_by_value(tf.math.log(x), -1., 1.): -1, gradient 0.0" in text
    assert (f"nanguard.tf.detect: backward of RealDiv (NaN, op RealDiv) at tf_softmax_nan.py:{WHERE_LINE}"
            in text)
    assert f"tape.gradient() called at tf_softmax_nan.py:{GRADIENT_LINE}" in text
    assert f"the +Inf of 1/h that the where hides, forward RealDiv at line {WHERE_LINE}" in text
    assert "f(x) = tf.where(x != 0, 1/x, 0), gradient at [-1, 0, 1]: [-1, nan, -1]" in text
    assert "the double tf.where: 1/tf.where(x != 0, x, 1): [-1, 0, -1]" in text
    assert "nanguard.tf.safe_where(x != 0, lambda v: 1/v, x): [-1, 0, -1]" in text
    assert text.count("(finite; detect() found nothing)") == 2
    assert "zeroed by hand: loss per step: 1.0658, 1.6494, 1.1993; was_nan per step [False, True, False]" in text
    assert "the bad batch: step 2: non-finite gradients in W1:0 (3 NaN of 9) -> skipped" in text
    assert "no report" not in text and "failed" not in text and "skipped: TensorFlow" not in text


@pytest.mark.slow
def test_demo_command_runs_the_tf_section_quietly():
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    done = subprocess.run([sys.executable, "-m", "nanguard", "demo", "--section", "tf_stories"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "All demo sections finished." in done.stdout and "tf_softmax_nan.py" in done.stdout
    assert "oneDNN" not in done.stderr and "I0000" not in done.stderr, done.stderr
