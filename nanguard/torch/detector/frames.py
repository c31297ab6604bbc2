"""Where in the user's program: the innermost frame outside torch and nanguard, and its code.

Frames are read only after a detection (or, cheaply, as (file, line, function) when the tape
records a top-level call); no frame object is ever kept, because a frame keeps every local
variable of the user's function alive.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType
from typing import Collection, List, Optional

import torch

from nanguard.core.location import PASS_THROUGH_FILES, Frame
from nanguard.core.opnames import op_base

import nanguard

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_NANGUARD_DIR = os.path.dirname(os.path.abspath(nanguard.__file__)) + os.sep
# the seed stories ship inside the package but are user programs: their lines are the finding
_STORIES_DIR = os.path.join(_NANGUARD_DIR, "stories") + os.sep
_INTERNAL_CACHE: dict = {}

# Torch files that are machinery, not an API a user calls.
_TORCH_MACHINERY = ("utils/_python_dispatch.py", "_ops.py", "overrides.py", "autograd/", "_tensor_str.py",
                    "nn/modules/module.py", "utils/_contextlib.py", "_compile.py", "_dynamo/",
                    "func/", "_functorch/", "nn/utils/stateless.py", "utils/hooks.py")


def is_internal(filename: str) -> bool:
    """A frame of torch, of nanguard itself, or of a launcher or decorator that passes calls through."""
    hit = _INTERNAL_CACHE.get(filename)
    if hit is None:
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        ours = path.startswith(_NANGUARD_DIR) and not path.startswith(_STORIES_DIR)
        hit = path.startswith(_TORCH_DIR) or ours or path in PASS_THROUGH_FILES or filename.startswith("<frozen")
        _INTERNAL_CACHE[filename] = hit
    return hit


_ABS_CACHE: dict = {}


def _absolute(filename: str) -> str:
    """Absolute path (``python train.py`` records ``train.py``); pseudo-files stay as they are."""
    path = _ABS_CACHE.get(filename)
    if path is None:
        path = filename if filename.startswith("<") else os.path.abspath(filename)
        _ABS_CACHE[filename] = path
    return path


def _frame_of(f: FrameType) -> Frame:
    return Frame(_absolute(f.f_code.co_filename), f.f_lineno, f.f_code.co_name)


def user_frame(start: Optional[FrameType] = None, stop: Collection[CodeType] = ()) -> Optional[Frame]:
    """The innermost frame outside torch and nanguard, walking out from ``start``.

    Returns None when a frame whose code is in ``stop`` comes first: replays use this to say
    "the user's line is the one recorded with the call being replayed, not the live stack".
    """
    f = start if start is not None else sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code in stop:
            return None
        if not is_internal(code.co_filename):
            return _frame_of(f)
        f = f.f_back
    return None


def user_stack(start: Optional[FrameType] = None, limit: int = 8) -> List[Frame]:
    """User frames from innermost outwards (at most ``limit``)."""
    f = start if start is not None else sys._getframe(1)
    out: List[Frame] = []
    while f is not None and len(out) < limit:
        if not is_internal(f.f_code.co_filename):
            out.append(_frame_of(f))
        f = f.f_back
    return out


def torch_api(start: Optional[FrameType] = None, stop: Collection[CodeType] = ()) -> Optional[str]:
    """The innermost public torch Python function on the stack below the user's frame.

    For an op inside ``F.multi_head_attention_forward`` this is that function; for an op the
    user called directly (``torch.sqrt``, implemented in C++) there is none and None is returned.
    """
    f = start if start is not None else sys._getframe(1)
    while f is not None:
        code = f.f_code
        filename = code.co_filename
        if code in stop or not is_internal(filename):
            return None
        path = os.path.abspath(filename)
        if path.startswith(_TORCH_DIR):
            rel = path[len(_TORCH_DIR):].replace(os.sep, "/")
            name = code.co_name
            if not name.startswith("_") and not any(rel.startswith(m) for m in _TORCH_MACHINERY):
                module = "torch." + rel[:-3].replace("/", ".")
                if module.endswith(".__init__"):
                    module = module[: -len(".__init__")]
                qual = getattr(code, "co_qualname", name)
                if module.startswith("torch.nn.modules.") and "." in qual:
                    return "torch.nn." + qual  # torch.nn.MultiheadAttention.forward
                if module == "torch._tensor":
                    return "Tensor." + qual.split(".")[-1]
                return f"{module}.{qual}"
        f = f.f_back
    return None


_OPERATORS = {"add": "+", "sub": "-", "rsub": "-", "mul": "*", "div": "/", "true_divide": "/",
              "pow": "**", "matmul": "@", "mm": "@", "bmm": "@", "neg": "-"}


def guess_torch_function(op_name: str, code: str) -> Optional[str]:
    """The user-facing spelling of an aten op, read off the user's line when it appears there."""
    base = op_base(op_name)
    for prefix, label in (("torch.", "torch."), ("F.", "torch.nn.functional."),
                          ("torch.nn.functional.", "torch.nn.functional."), ("torch.special.", "torch.special.")):
        if f"{prefix}{base}(" in code:
            return label + base
    if f".{base}(" in code or f".{base}_(" in code:
        return "Tensor." + base
    symbol = _OPERATORS.get(base)
    if symbol and symbol in code:
        return f"operator {symbol}"
    if hasattr(torch, base):
        return "torch." + base
    if hasattr(torch.nn.functional, base):
        return "torch.nn.functional." + base
    return None
