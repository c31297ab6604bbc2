"""The public face of `nanguard.jax.detect`: options, modes, the decorator, JSON, and a whole
script run under it (as ``nanguard run`` does)."""

from __future__ import annotations

import json
import runpy
import textwrap
import warnings

import jax
import jax.numpy as jnp
import pytest

import nanguard.jax as ngj
from nanguard.core.report import NonFiniteWarning, Report
from nanguard.errors import NonFiniteError
from tests.jax.detector import programs as P


def test_the_name_is_registered_lazily_in_nanguard_jax():
    assert ngj.detect is __import__("nanguard.jax.detector", fromlist=["detect"]).detect
    assert "detect" in dir(ngj) and ngj.Report is Report


@pytest.mark.parametrize("kwargs, error", [
    ({"check": "nans"}, ValueError), ({"check": []}, ValueError), ({"check": 3}, TypeError),
    ({"mode": "stop"}, ValueError), ({"exhaustive": "yes"}, TypeError),
])
def test_bad_options_fail_early_in_words(kwargs, error):
    with pytest.raises(error, match="nanguard.jax.detect"):
        ngj.detect(**kwargs)


def test_options_must_be_keywords():
    with pytest.raises(TypeError):
        ngj.detect("nan")


def test_record_keeps_the_first_report_and_stops_checking():
    with ngj.detect(mode="record") as d:
        jnp.log(jnp.zeros(2))
        jnp.sqrt(-jnp.ones(2))
    assert d.report.op == "log" and d.report.kind == "inf" and d.report.phase == "forward"
    assert "found=True" in repr(d)


def test_warn_warns_once_and_goes_on():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ngj.detect(mode="warn") as d:
            y = jax.jit(P.log_of_zero)(jnp.array([0.0, 1.0]))
            jax.jit(P.exp_overflow)(jnp.array([1000.0]))
    assert float(y) == float("-inf")
    found = [w for w in caught if issubclass(w.category, NonFiniteWarning)]
    assert len(found) == 1 and "forward of log" in str(found[0].message)
    assert d.report is not None


def test_raise_gives_a_floating_point_error_with_the_report():
    with pytest.raises(FloatingPointError) as info:
        with ngj.detect():
            jax.jit(P.log_of_zero)(jnp.array([0.0, 1.0]))
    assert isinstance(info.value, NonFiniteError) and isinstance(info.value.report, Report)
    assert str(info.value).startswith("nanguard: first non-finite value (-Inf) — forward of log")


def test_check_nan_ignores_an_overflow_that_stays_inf():
    with ngj.detect(check="nan", mode="record") as d:
        jax.jit(P.exp_overflow)(jnp.array([1.0, 100.0]))
    assert d.report is None
    with ngj.detect(check="inf", mode="record") as d:
        jax.jit(P.exp_overflow)(jnp.array([1.0, 100.0]))
    assert d.report is not None and d.report.op == "exp"


def test_decorator_on_a_jitted_function_counts_steps():
    step = ngj.detect(mode="record")(jax.jit(jax.grad(P.double_where)))
    step(jnp.ones(3))
    step(jnp.ones(3) * 2)
    assert step.__wrapped__ is not None
    step(jnp.array([0.0, 1.0, 2.0]))


def test_decorator_report_and_step_number():
    det = ngj.detect(mode="record")
    grad = jax.jit(jax.grad(P.double_where))

    @det
    def train(xs):
        for x in xs:
            grad(x)

    train([jnp.ones(3), jnp.ones(3) * 2, jnp.array([0.0, 1.0, 2.0])])
    assert det.report.step == 3 and det.report.phase == "backward"
    assert "step 3 of the training loop" in det.report.format(color=False)


def test_a_single_call_is_not_a_training_loop():
    """A jitted function called once (the README's example) is no loop: no "step 1 of the
    training loop" line."""
    with ngj.detect(mode="record") as det:
        jax.jit(jax.grad(P.double_where))(jnp.array([0.0, 1.0, 2.0]))
    assert det.report is not None and det.report.phase == "backward"
    assert det.report.step is None and "training loop" not in det.report.format(color=False)


def test_a_fresh_use_forgets_the_previous_report():
    det = ngj.detect(mode="record")
    with det:
        jnp.log(jnp.zeros(1))
    assert det.report is not None
    with det:
        jnp.log(jnp.ones(1))
    assert det.report is None


def test_the_report_is_json_and_names_the_user_line():
    with ngj.detect(mode="record") as d:
        jax.jit(jax.grad(P.double_where))(jnp.array([0.0, 1.0]))
    data = json.loads(d.report.to_json())
    assert data["found"] and data["phase"] == "backward" and data["op"] == "div"
    assert data["line"] == P.line_of(P.double_where) and data["forward_line"] == data["line"]
    assert data["api"] == "jnp.sqrt" and data["inputs"] and data["outputs"][0]["posinf"] == 1
    assert "nanguard.jax.sqrt" in data["suggestion"]


def test_exhaustive_blames_a_discarded_nan_first():
    def loss(x):
        root = jnp.sqrt(x)       # NaN at x < 0, discarded by the where below
        return jnp.where(x > 0, root, 0.0).sum() + jnp.log(x[1])

    x = jnp.array([-1.0, 0.0, 4.0])
    with ngj.detect(mode="record") as d:
        jax.jit(loss)(x)
    assert (d.report.op, d.report.kind) == ("log", "inf")
    with ngj.detect(mode="record", exhaustive=True) as d:
        jax.jit(loss)(x)
    assert (d.report.op, d.report.kind, d.report.phase) == ("sqrt", "nan", "forward")


def test_detection_leaves_the_values_untouched():
    x = jnp.array([0.0, 1.0, 4.0])
    plain = jax.jit(jax.grad(P.double_where))(x)
    with ngj.detect(mode="record"):
        checked = jax.jit(jax.grad(P.double_where))(x)
    assert jnp.array_equal(plain, checked, equal_nan=True)


SCRIPT = '''
import jax
import jax.numpy as jnp


def loss(w, x):
    return jnp.linalg.norm(x @ w, axis=-1).mean()


step = jax.jit(jax.value_and_grad(loss))
w = jnp.ones((3, 2))
for i in range(3):
    x = jnp.ones((4, 3)) * (2 - i)     # the third batch is all zeros
    value, grad = step(w, x)
    w = w - 0.1 * grad
'''


def test_a_script_that_imports_jax_runs_under_detect(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(tmp_path)
    det = ngj.detect(check="both", mode="raise", exhaustive=False)
    with pytest.raises(NonFiniteError):
        with det:
            runpy.run_path(str(script), run_name="__main__")
    report = det.report
    assert report.file == str(script) and report.line == 7 and report.phase == "backward"
    assert report.forward_op == "norm" and report.step == 3
    assert "optax.safe_norm" in report.suggestion


def test_nothing_is_checked_after_the_context_exits():
    from nanguard.jax.detector import hooks
    with ngj.detect(mode="record"):
        pass
    assert not hooks._LOCAL.observers
    jax.jit(P.log_of_zero)(jnp.zeros(2))       # not detected, and no error


def test_exhaustive_finds_a_nan_that_never_reaches_the_outputs():
    def forward(x):
        return jnp.where(x > 0, jnp.sqrt(x), 0.0).sum()   # sqrt(-1) = NaN, discarded

    x = jnp.array([-1.0, 4.0])
    with ngj.detect(mode="record") as d:
        jax.jit(forward)(x)
    assert d.report is None
    with ngj.detect(mode="record", exhaustive=True) as d:
        jax.jit(forward)(x)
    assert (d.report.op, d.report.phase, d.report.kind) == ("sqrt", "forward", "nan")
    with ngj.detect(mode="record", exhaustive=True) as d:
        jax.jit(forward)(jnp.array([1.0, 4.0]))
    assert d.report is None
