"""Demo section "tf_stories": the TensorFlow seed stories 003 and 004, replayed in TensorFlow.

Runs only where TensorFlow is installed; elsewhere it prints one line saying how to get it
(``pip install 'nanguard[tf]'``) and the demo goes on. Both stories are real programs in
``nanguard.stories`` (``tf_cross_entropy_nan`` / ``_fixed``, ``tf_softmax_nan`` / ``_fixed``):
the naive one goes NaN, ``nanguard.tf.detect`` names the op and the story's own line, and the
fixed one (a stable or safe op) trains clean. Everything runs eagerly on a few numbers, so the
section takes a few seconds after the TensorFlow import.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import textwrap
from typing import Any, Callable, List, Tuple

import nanguard.stories
from nanguard.demo import Show, installed

HINT = "TensorFlow stories (seeds 003, 004) skipped: TensorFlow is not installed; pip install 'nanguard[tf]'"
XENT = nanguard.stories.get("tf_cross_entropy")
SOFTMAX = nanguard.stories.get("tf_softmax")


def _import_tf() -> Any:
    """TensorFlow, imported quietly (no C++ info lines, no oneDNN notice)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    return importlib.import_module("tensorflow")


def _fmt(values: Any, spec: str = ".8g") -> str:
    flat = [float(v) + 0.0 for v in values.numpy().reshape(-1)]  # + 0.0 prints -0.0 as 0
    return "[" + ", ".join("nan" if v != v else format(v, spec) for v in flat) + "]"


def _quietly(fn: Callable[[], Any]) -> Tuple[Any, List[str], Any]:
    """Run a story's main(): its result, the lines it printed, and the error it raised (or None)."""
    out = io.StringIO()
    result, error = None, None
    with contextlib.redirect_stdout(out):
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001  (the story's own failure is what we show)
            error = exc
    return result, out.getvalue().splitlines(), error


def _losses(lines: List[str]) -> str:
    return ", ".join(line.split("loss ", 1)[1].split()[0] for line in lines if line.startswith("step"))


def _where(story: "nanguard.stories.Story", version: str, line: int) -> str:
    return f"{story.path(version).name}:{line}"


def _show_lines(show: Show, story: "nanguard.stories.Story", version: str, texts: Tuple[str, ...]) -> None:
    source = story.source(version).splitlines()
    for text in texts:
        n = story.line(text, version)
        show.code(f"{n:3} │ {source[n - 1].strip()}")


def _report(show: Show, label: str, report: Any) -> None:
    if report is None:
        show.bad(label, "no report")
        return
    where = f"{os.path.basename(report.file or '?')}:{report.line}"
    show.good(label, f"{report.headline} ({report.what}, op {report.op}) at {where}")
    show.note(f"{report.line} │ {(report.code or '').strip()}")
    if report.call_line is not None:
        show.note(f"tape.gradient() called at {os.path.basename(report.call_file or '?')}:{report.call_line}")
    for n, text in enumerate(textwrap.wrap(report.explanation, 84)):
        show.note(("why " if n == 0 else "    ") + text)


def _value_and_grad(tf: Any, fn: Callable[[Any], Any], values: Any) -> Tuple[Any, Any]:
    x = tf.Variable(values)
    with tf.GradientTape() as tape:
        y = fn(x)
    return y, tape.gradient(y, x)


def cross_entropy(show: Show, tf: Any, ngt: Any) -> None:
    show.story("Seed 003: cross-entropy by hand, and a softmax probability that rounds to exactly 0")
    _show_lines(show, XENT, "nan", ("y_conv = tf.nn.softmax(tf.matmul", "cross_entropy = -tf.reduce_sum("))
    show.note("(the second sample's logits are 150 apart: softmax gives exactly 0, log(0) = -inf, "
              "and its label's 0 · -inf = NaN)")
    module = importlib.import_module(XENT.module("nan"))
    _, lines, _ = _quietly(lambda: module.main(3))
    show.bad(f"python -m {XENT.module('nan')}: loss per step", _losses(lines))

    show.code("with nanguard.tf.detect(): main()")
    with ngt.detect(mode="record") as found:
        _quietly(lambda: module.main(1))
    _report(show, "nanguard.tf.detect", found.report)

    show.note("the seed's patches, on a confidently wrong sample (logits [90, -60, 15], label class 1):")
    y = tf.constant([[0.0, 1.0, 0.0]])
    logits = [[90.0, -60.0, 15.0]]
    for text, fn in (
        ("log(clip_by_value(y_conv, 1e-10, 1.0))",
         lambda v: -tf.reduce_sum(y * tf.math.log(tf.clip_by_value(tf.nn.softmax(v), 1e-10, 1.0)))),
        ("log(y_conv + 1e-10)", lambda v: -tf.reduce_sum(y * tf.math.log(tf.nn.softmax(v) + 1e-10))),
    ):
        loss, grad = _value_and_grad(tf, fn, logits)
        show.bad(text, f"loss {float(loss):.4f}, gradient {_fmt(grad)}  (biased, and nothing to learn from)")
    loss, grad = _value_and_grad(tf, lambda v: -tf.reduce_sum(y * tf.nn.log_softmax(v)), logits)
    show.good("tf.nn.log_softmax(logits)", f"loss {float(loss):.4f}, gradient {_fmt(grad)}  (the true values)")

    fixed = importlib.import_module(XENT.module("fixed"))
    _show_lines(show, XENT, "fixed", ("log_probs = tf.nn.log_softmax(",))
    with ngt.detect(mode="record") as clean:
        _, lines, _ = _quietly(lambda: fixed.main(3))
    show.good(f"python -m {XENT.module('fixed')}: loss per step",
              _losses(lines) + ("  (finite; detect() found nothing)" if clean.report is None else "  (reported!)"))

    probs = tf.nn.softmax(tf.matmul(tf.constant(module.FEATURES), tf.eye(3) * 1.5))
    labels = tf.constant(module.LABELS)
    naive = -tf.reduce_sum(labels * tf.math.log(probs))
    safe = tf.reduce_sum(ngt.cross_entropy_probs(labels, probs))
    show.note("when only the probabilities y_conv are at hand (the first step's):")
    show.bad("-tf.reduce_sum(y_ * tf.math.log(y_conv))", f"{float(naive):.4f}")
    show.good("nanguard.tf.cross_entropy_probs(y_, y_conv)", f"{float(safe):.4f}  (0 · log 0 = 0)")

    p = [0.1, 0.2, 0.0, 0.7]
    naive, grad = _value_and_grad(tf, lambda v: -tf.reduce_sum(v * tf.math.log(v)), p)
    show.note("the seed's entropy of p = [0.1, 0.2, 0.0, 0.7]:")
    show.bad("-tf.reduce_sum(p * tf.math.log(p))", f"{float(naive)}, gradient {_fmt(grad, '.8f')}")
    value, grad = _value_and_grad(tf, ngt.entropy, p)
    show.good("nanguard.tf.entropy(p)", f"{float(value):.8f}, gradient {_fmt(grad, '.8f')}")


def softmax(show: Show, tf: Any, ngt: Any) -> None:
    show.story("Seed 004: the softmax output turns NaN, and check_numerics cannot say why")
    _show_lines(show, SOFTMAX, "nan", ("return tf.where(h_ok, 1.0 / h", "logits = tf.matmul(inverse(h)",
                                        "probabilities = tf.debugging.check_numerics("))
    show.note("(1/h at a ReLU's exact 0 is hidden by the where in the value, not in the gradient)")
    module = importlib.import_module(SOFTMAX.module("nan"))
    _, lines, error = _quietly(lambda: module.main(3))
    show.bad(f"python -m {SOFTMAX.module('nan')}: loss per step", _losses(lines))
    message = getattr(error, "message", str(error)).split("} ", 1)[-1].split(" [Op:")[0].strip()
    show.bad(f"then at step {len(lines) + 1}, {type(error).__name__}", f"{message}  (which op? which line?)")

    show.note("clipping the logits to ±15 'helps' by cutting the gradient, as the seed's answer shows:")
    x = tf.Variable(0.001)
    with tf.GradientTape(persistent=True) as tape:
        y = tf.math.log(x)
        clipped = tf.clip_by_value(tf.math.log(x), -1.0, 1.0)
    show.bad("tf.math.log(x) at x = 0.001", f"{float(y):.7g}, gradient {float(tape.gradient(y, x)):.8g}")
    show.bad("tf.clip_by_value(tf.math.log(x), -1., 1.)",
             f"{float(clipped):.7g}, gradient {float(tape.gradient(clipped, x))}  (the gradient is gone, "
             "not fixed)")

    show.code("with nanguard.tf.detect(check='nan'): main()")
    with ngt.detect(mode="record", check="nan") as found:
        _quietly(lambda: module.main(3))
    _report(show, "nanguard.tf.detect", found.report)
    with ngt.detect(mode="record") as first:
        _quietly(lambda: module.main(3))
    if first.report is not None:
        show.note(f"(the default check='both' stops one op earlier: the {first.report.what} of 1/h that the "
                  f"where hides, {first.report.phase} {first.report.op} at line {first.report.line})")

    x = tf.constant([-1.0, 0.0, 1.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        single = tf.where(tf.not_equal(x, 0.0), 1.0 / x, tf.zeros_like(x))
        safe_x = tf.where(tf.not_equal(x, 0.0), x, tf.ones_like(x))
        double = tf.where(tf.not_equal(x, 0.0), 1.0 / safe_x, tf.zeros_like(x))
        packaged = ngt.safe_where(tf.not_equal(x, 0.0), lambda v: 1.0 / v, x)
    show.bad("seed: f(x) = tf.where(x != 0, 1/x, 0), gradient at [-1, 0, 1]", _fmt(tape.gradient(single, x)))
    show.good("the double tf.where: 1/tf.where(x != 0, x, 1)", _fmt(tape.gradient(double, x)))
    show.good("nanguard.tf.safe_where(x != 0, lambda v: 1/v, x)", _fmt(tape.gradient(packaged, x)))

    fixed = importlib.import_module(SOFTMAX.module("fixed"))
    _show_lines(show, SOFTMAX, "fixed", ("return nanguard.tf.safe_where(",))
    with ngt.detect(mode="record") as clean:
        _, lines, error = _quietly(lambda: fixed.main(3))
    show.good(f"python -m {SOFTMAX.module('fixed')}: loss per step",
              _losses(lines) + ("  (finite; detect() found nothing)" if clean.report is None and error is None
                                else f"  (failed: {error or clean.report.headline})"))

    show.code("""
# the seed zeroed NaN gradients by hand and tracked a was_nan flag:
was_nan = tf.reduce_any([tf.reduce_any(tf.math.is_nan(g)) for g in grads])
grads = [tf.where(tf.math.is_nan(g), tf.zeros_like(g), g) for g in grads]
""")
    import keras  # Keras 3 comes with TensorFlow >= 2.16

    by_hand = _HandZeroed(tf, keras.optimizers.SGD(0.1))
    _, lines, error = _quietly(lambda: module.main(3, optimizer=by_hand))
    show.bad("the naive program, zeroed by hand: loss per step",
             f"{_losses(lines)}; was_nan per step {by_hand.was_nan}  (which variable? how many? why?)")
    show.code("""
# nanguard: wrap the optimizer; the bad step is skipped, counted and named
optimizer = nanguard.tf.GuardedOptimizer(tf.keras.optimizers.SGD(0.1))
""")
    guarded = ngt.GuardedOptimizer(keras.optimizers.SGD(0.1))
    _, lines, error = _quietly(lambda: module.main(3, optimizer=guarded))
    records = guarded.records
    if error is None and records.events:
        show.good("the naive program, guarded: loss per step", _losses(lines))
        show.good("the bad batch", records.events[0].describe())
    else:
        show.bad("the naive program, guarded", f"{error or 'no step was skipped'}")


class _HandZeroed:
    """The seed's own fix, as an optimizer for the story's loop: NaN gradients replaced by 0
    with ``tf.where``, and a ``was_nan`` flag per step."""

    def __init__(self, tf: Any, inner: Any) -> None:
        self.tf, self.inner, self.was_nan = tf, inner, []

    def apply_gradients(self, pairs: Any) -> None:
        tf = self.tf
        pairs = list(pairs)
        grads = [g for g, _ in pairs]
        was_nan = tf.reduce_any(tf.convert_to_tensor([tf.reduce_any(tf.math.is_nan(g)) for g in grads]))
        self.was_nan.append(bool(was_nan))
        self.inner.apply_gradients([(tf.where(tf.math.is_nan(g), tf.zeros_like(g), g), v) for g, v in pairs])


def run(show: Show) -> None:
    if not installed("tensorflow"):
        show.skip(HINT)
        return
    try:
        tf = _import_tf()
        ngt = importlib.import_module("nanguard.tf")
    except ImportError as error:  # installed but broken: say so in one line and go on
        show.skip(f"{HINT.split(':')[0]}: TensorFlow does not import ({error}); pip install 'nanguard[tf]'")
        return
    show.title("TensorFlow: seed stories 003 and 004")
    cross_entropy(show, tf, ngt)
    softmax(show, tf, ngt)
