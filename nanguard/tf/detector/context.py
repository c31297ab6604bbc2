"""`nanguard.tf.detect()`: the public context manager / decorator for TensorFlow and Keras programs.

How it works: `hooks` (the op callback, the gradient dispatch and ``tape.gradient``), `graph`
(the checks added to traced graphs), `values` (the rule and the summaries of eager values),
`explain` (why and fix, from the hazard catalogue), `build` (the report), `frames` (the user's line).
"""

from __future__ import annotations

from typing import Any, Iterable, Union

from nanguard.core.detect_api import DetectBase
from nanguard.core.options import Check, Kind, Mode, parse_check, parse_exhaustive, parse_mode
from nanguard.core.report import NonFiniteWarning
from nanguard.tf.detector import graph, hooks
from nanguard.tf.detector.state import LOCAL, Session


class detect(DetectBase):
    """Stop at the first TensorFlow op, forward or backward, eager or compiled, that makes NaN or ±Inf.

    Use it as a context manager or a decorator around eager code, ``tf.function`` code and
    Keras ``model.fit``. It names the TF op (``Sqrt``), your source line, the Keras layer path,
    the inputs (exact counts of zeros, negatives, NaN, ±Inf), why it happened and the safe op to
    use (``nanguard.tf.sqrt``...). For a gradient op it names the forward op, the forward line
    and where ``tape.gradient`` was called. Values are never changed: the checks only read them.

    * eager ops are checked as they run (one vectorised pass over each op's outputs on the CPU);
    * a ``tf.function`` (and ``model.fit``'s compiled step, XLA included) traced while detection
      is active gets an in-graph check next to each op that can make NaN/Inf at a singular point
      (sqrt, log, exp, division, pow, softmax, acos, mean ...) and next to every op of their
      gradients, next to each float16/bfloat16 op that overflows in practice (matmul,
      convolution, sum, cast ...) in the forward pass, and next to the batch a ``tf.data``
      iterator hands the step; with ``check="nan"``, also next to the ops downstream of those
      where an inf turns into NaN (``0 * inf``); ``exhaustive=True`` checks every float op. The
      function reports when it returns. A function traced before ``detect()`` was entered is
      checked at its outputs only.

    The rule: NaN where no input held NaN, or ±Inf where every input was finite. A ``-inf``
    mask that flows through softmax and comes out finite is not reported; ``log(0)``, exp
    overflow and ``x/0`` are, and so is a float16 overflow under mixed precision (which the loss
    scaler would skip at every step), but not the overflows in its gradients that the loss
    scaler exists for. NaN already in the data is reported with phase ``"input"`` at the line
    that first used it (for a ``tf.data`` batch, the line that fetched it).

    Args:
        check: ``"nan"``, ``"inf"`` or ``"both"`` (default; ``"all"`` is the same): which values count as a
            finding.
        mode: ``"raise"`` (default) raises ``nanguard.NonFiniteError`` (a ``FloatingPointError``)
            carrying ``.report``; ``"warn"`` issues a ``NonFiniteWarning``; ``"record"`` keeps
            the first report on ``.report``. After the first finding, checking stops.
        exhaustive: check every op inside compiled graphs, not only the singular ones.

    Example:
        >>> x = tf.constant([0.0, 4.0])
        >>> with nanguard.tf.detect(mode="record") as d:
        ...     y = tf.math.log(x)
        >>> d.report.op, d.report.kind, d.report.line
        ('Log', 'inf', 3)
    """

    API = "nanguard.tf.detect"

    def __init__(self, *, check: Union[Check, Iterable[Kind]] = "both", mode: Mode = "raise",
                 exhaustive: bool = False) -> None:
        self._session = Session(check=parse_check(check, self.API), mode=parse_mode(mode, self.API),
                                exhaustive=parse_exhaustive(exhaustive, self.API))
        self._active: list = []

    def __enter__(self) -> "detect":
        session = self._session
        if not self._active:
            session.report = None
        graph.flags().reset()
        if not LOCAL.sessions:
            hooks.install()
        LOCAL.sessions.append(session)
        self._active.append(session)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        session = self._active.pop()
        try:
            if exc_type is None and session.report is None:
                found = graph.poll()  # a compiled function that ran inside the block as its last act
                if found is not None:
                    session.deliver(found)
        finally:
            if session in LOCAL.sessions:
                LOCAL.sessions.remove(session)
            if not LOCAL.sessions:
                hooks.uninstall()
        return False


__all__ = ["NonFiniteWarning", "detect"]
