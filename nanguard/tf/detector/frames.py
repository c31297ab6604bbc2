"""The user's line: the innermost frame outside TensorFlow, Keras, nanguard and the launch machinery.

Eager ops are located from the live Python stack (`user_frame`); ops traced into a graph
(``tf.function``, ``model.fit``) from the creation traceback TensorFlow keeps on every graph op
(`graph_frame`), so a finding inside a compiled step still names the line that built the op.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
from typing import Any, Dict, List, Optional

import tensorflow as tf

import nanguard
from nanguard.core.location import PASS_THROUGH_FILES, Frame

_NANGUARD_DIR = os.path.dirname(os.path.abspath(nanguard.__file__)) + os.sep
# the seed stories ship inside the package but are user programs: their lines are the finding
_STORIES_DIR = os.path.join(_NANGUARD_DIR, "stories") + os.sep
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (tf.__file__, getattr(sys.modules.get("keras"), "__file__", None),
                 getattr(sys.modules.get("tensorflow.python"), "__file__", None))
    if path
)
_SITE_KERAS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tf.__file__))), "keras") + os.sep
_CACHE: Dict[str, bool] = {}
# autograph's call machinery: a converted tf.function calls tape.gradient through it
_AUTOGRAPH_DIR = os.path.join(os.path.dirname(os.path.abspath(tf.__file__)), "python", "autograph") + os.sep


def is_internal(filename: str) -> bool:
    """A frame of TensorFlow, Keras, nanguard itself, of autograph's converted copy of a
    ``tf.function`` (the user's own lines are found through TensorFlow's source map, see
    `user_frame`), or of the launchers and decorators that pass calls through."""
    hit = _CACHE.get(filename)
    if hit is None:
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        ours = path.startswith(_NANGUARD_DIR) and not path.startswith(_STORIES_DIR)
        hit = (ours or path.startswith(_LIBRARY_DIRS) or path.startswith(_SITE_KERAS) or path in PASS_THROUGH_FILES
               or filename.startswith("<frozen") or "__autograph_generated_file" in filename)
        _CACHE[filename] = hit
    return hit


def _mapped_user_frame() -> Optional[Frame]:
    """While a ``tf.function`` is traced, autograph runs a converted copy of the user's code;
    TensorFlow's stack extraction maps its lines back to the user's source."""
    from nanguard.tf._compat import tf_stack
    for entry in reversed(list(tf_stack.extract_stack())):
        if not is_internal(entry.filename):
            return Frame(os.path.abspath(entry.filename), entry.lineno, entry.name)
    return None


def user_frame(skip: int = 1) -> Optional[Frame]:
    """The innermost frame of the live stack that is the user's code."""
    if not tf.executing_eagerly():
        return _mapped_user_frame()
    frame: Any = sys._getframe(skip)
    while frame is not None:
        code = frame.f_code
        if not is_internal(code.co_filename):
            return Frame(os.path.abspath(code.co_filename) if not code.co_filename.startswith("<")
                         else code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def gradient_call_name(caller: Any) -> str:
    """What the user called that took this gradient, for the report's "... called at" line.

    ``caller`` is the Python frame that called ``tape.gradient``. The user's own code called
    it, eagerly or from autograph's converted copy of a ``tf.function`` step (through
    autograph's call machinery): ``tape.gradient()``. A library did (Keras' ``train_step``
    inside ``model.fit``): the library function the user called, spelled as on the user's
    line (``model.fit()``), else the library function that took it (``train_step()``), never
    a ``backward()`` nobody wrote.
    """
    frame = caller
    while frame is not None and frame.f_code.co_filename.startswith(_AUTOGRAPH_DIR):
        frame = frame.f_back
    if frame is None or not _library_frame(frame.f_code.co_filename):
        return "tape.gradient()"
    taker, called = frame.f_code.co_name, set()
    while frame is not None and _library_frame(frame.f_code.co_filename):
        called.add(frame.f_code.co_name)
        frame = frame.f_back
    if frame is not None:
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        for match in re.finditer(r"([A-Za-z_][\w.]*)\s*\(", code):
            if match.group(1).rsplit(".", 1)[-1] in called:
                return f"{match.group(1)}()"
    return f"{taker}()"


def _library_frame(filename: str) -> bool:
    """TensorFlow's, Keras' or nanguard's own code; not the user's, nor autograph's copy of it."""
    return is_internal(filename) and "__autograph_generated_file" not in filename


def user_stack(limit: int = 8) -> List[Frame]:
    """The user's frames of the live stack, innermost first (at most ``limit``)."""
    out: List[Frame] = []
    frame: Any = sys._getframe(1)
    while frame is not None and len(out) < limit:
        code = frame.f_code
        if not is_internal(code.co_filename):
            out.append(Frame(os.path.abspath(code.co_filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    return out


def graph_frame(op: Any) -> Optional[Frame]:
    """The user's line that created graph op ``op`` (TensorFlow records a traceback per op)."""
    try:
        trace = op.traceback  # outermost first
    except Exception:  # noqa: BLE001  (an op without a traceback simply has no line)
        return None
    for entry in reversed(list(trace or ())):
        filename = entry.filename
        if not is_internal(filename):
            return Frame(os.path.abspath(filename) if not filename.startswith("<") else filename,
                         entry.lineno, entry.name)
    return None


def layer_path() -> Optional[str]:
    """The Keras layer path being called (``functional/encoder/dense``), or None outside layers."""
    keras_scope = sys.modules.get("keras.src.backend.common.name_scope")
    if keras_scope is None:
        return None
    try:
        path = keras_scope.current_path()
    except Exception:  # noqa: BLE001  (a Keras internal changed: the report simply has no layer)
        return None
    return path or None


__all__ = ["Frame", "graph_frame", "is_internal", "layer_path", "user_frame", "user_stack"]
