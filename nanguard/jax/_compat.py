"""Every private JAX API nanguard uses, looked up here once (see ``nanguard._private``).

``nanguard.jax.detect`` sees every executed computation through ``jax._src`` internals (the
C++ fast path's post hook, the Python path of ``jit``, the ``jit`` primitive) and names lines
through ``source_info_util``. The rest of ``nanguard.jax`` imports them from here, so a JAX
release that moves one is fixed in this file, and a JAX without one raises
``nanguard.errors.UnsupportedVersionError`` when ``detect()`` is used (importing
``nanguard.jax``, the safe ops and the guard keep working).
"""

from __future__ import annotations

from typing import Any

import jax

from nanguard._private import PrivateAPI

# The oldest JAX ``pyproject.toml`` declares (the ``jax`` extra). In the released wheels the
# post hook state arrived in 0.8.0, ``pjit._run_python_pjit`` in 0.9.0 and the public
# ``jax.extend.core.DropVar`` the detector's replay needs in 0.10.0.
FLOOR = "0.10"

API = PrivateAPI("jax", jax.__version__)
_DETECT = "nanguard.jax.detect's dispatch hooks"

# the C++ fast path's thread-local post hook (the hook jax_debug_nans uses)
api: Any = API.module("jax._src.api", f"{_DETECT} (jax._src.api._post_hook_state)", FLOOR,
                      needs=("_post_hook_state",))
# the Python path of a jitted call (first calls), wrapped once
pjit: Any = API.module("jax._src.pjit", f"{_DETECT} (jax._src.pjit._run_python_pjit)", FLOOR,
                       needs=("_run_python_pjit",))
# the jit primitive, whose impl runs a jit equation eagerly (spelled pjit_p before JAX 0.7)
jit_primitive: Any = API.attr(API.optional_module("jax._src.pjit"), ("jit_p", "pjit_p"),
                              f"{_DETECT} (the jit primitive)", FLOOR)
# source locations of traced equations
source_info_util: Any = API.module(
    "jax._src.source_info_util", "JAX source locations (jax._src.source_info_util)", FLOOR,
    needs=("_source_info_context", "new_source_info", "raw_frame_to_frame"))
