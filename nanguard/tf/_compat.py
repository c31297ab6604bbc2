"""Every private TensorFlow API nanguard uses, looked up here once (see ``nanguard._private``).

The detector listens to TensorFlow through ``tensorflow.python`` internals (the op callback,
the tape's gradient dispatch, the recording switch); the guard asks whether a graph is
compiled by XLA. The rest of ``nanguard.tf`` imports them from here, so a TensorFlow release
that moves one is fixed in this file, and a TensorFlow without one raises
``nanguard.errors.UnsupportedVersionError`` when the feature that needs it is used (importing
``nanguard.tf`` and the safe ops keep working).
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from nanguard._private import PrivateAPI

# The oldest TensorFlow ``pyproject.toml`` declares (the ``tf`` and ``tf-cpu`` extras).
FLOOR = "2.21"

API = PrivateAPI("tensorflow", tf.__version__)
_DETECT = "nanguard.tf.detect's hooks"

# the op callback (the mechanism of tf.debugging.enable_check_numerics)
op_callbacks: Any = API.module("tensorflow.python.framework.op_callbacks", f"{_DETECT} (op callbacks)", FLOOR,
                               needs=("add_op_callback", "remove_op_callback"))
# the tape's gradient dispatch, and whether a tape is recording
pywrap_tfe: Any = API.module("tensorflow.python.pywrap_tfe", f"{_DETECT} (the eager tape)", FLOOR,
                             needs=("TFE_Py_TapeSetIsEmpty", "TFE_Py_RegisterGradientFunction"))
gradient_function: Callable[..., Any] = API.attr(
    API.optional_module("tensorflow.python.eager.backprop"), "_gradient_function",
    f"{_DETECT} (the eager gradient function)", FLOOR)
# the in-graph checks run outside the tape
record: Any = API.module("tensorflow.python.eager.record", f"{_DETECT} (tape recording)", FLOOR,
                         needs=("stop_recording",))
# whether the graph being traced is compiled by XLA (which drops tf.debugging.Assert)
control_flow_util: Any = API.module("tensorflow.python.ops.control_flow_util", "XLA context detection", FLOOR,
                                    needs=("GraphOrParentsInXlaContext",))
# the user's line while autograph runs a converted copy of their code
tf_stack: Any = API.module("tensorflow.python.util.tf_stack", "TensorFlow's stack extraction", FLOOR,
                           needs=("extract_stack",))
# an op's argument names (x, y for RealDiv)
op_def_registry: Any = API.module("tensorflow.python.framework.op_def_registry", "TensorFlow's op registry",
                                  FLOOR, needs=("get",))
strategy_supports_no_merge_call: Callable[[], bool] = API.attr(
    tf, "__internal__.distribute.strategy_supports_no_merge_call",
    "tf.__internal__.distribute.strategy_supports_no_merge_call", FLOOR)
