"""Names in reports: module paths (``model.encoder.layers.2``) and parameter names.

A *root* is an outermost module the program called. It is named by the user
(``detect(modules={"model": model})``) or after the variable that holds it in the user's
frames (``model``, ``self.encoder``), else by its class. Modules inside it are named by their
path in ``named_modules()``, parameters by their path in ``named_parameters()``; the wrapper
level of ``torch.compile`` (``_orig_mod``) is hidden.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch

from nanguard.torch.detector._state import STATE
from nanguard.torch.detector.frames import is_internal
from nanguard.torch.detector.session import Session


class Naming:
    """The names of one activation (guessed root names are cached for its lifetime)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._guessed: Dict[int, tuple] = {}   # id(root) -> (weakref, name)

    def root_name(self, root: torch.nn.Module) -> str:
        given = self.session.given_name(root)
        if given is not None:
            return given
        outer = STATE.modules[0] if STATE.modules else None
        if outer is not None and outer is not root:
            # a module checked inside an outermost call (multi-rank default mode): its path in it
            path = self.path(outer, root)
            if path != type(root).__name__:
                return path
        cached = self._guessed.get(id(root))
        if cached is not None and cached[0]() is root:
            return cached[1]
        name = _guess_name(root) or type(root).__name__
        try:
            self._guessed[id(root)] = (weakref.ref(root), name)
        except TypeError:
            pass
        return name

    def path(self, root: torch.nn.Module, target: torch.nn.Module) -> str:
        """The dotted path of ``target`` inside ``root`` (``model.encoder``)."""
        prefix = self.root_name(root)
        if target is root:
            return prefix
        for name, m in root.named_modules():
            if m is target:
                name = plain(name)
                return f"{prefix}.{name}" if name else prefix
        return type(target).__name__

    def live_path(self) -> Optional[str]:
        """The path of the module running now (exhaustive mode keeps the module stack)."""
        mods = STATE.modules
        if not mods:
            return None
        return self.path(mods[0], mods[-1])

    def paths_within(self, root: torch.nn.Module) -> List[Tuple[int, str]]:
        """(id(module), path) for ``root`` and every module inside it."""
        prefix = self.root_name(root)
        out = []
        for name, m in root.named_modules():
            name = plain(name)
            out.append((id(m), f"{prefix}.{name}" if name else prefix))
        return out

    def parameter_name(self, root: torch.nn.Module, name: str) -> str:
        """``model.0.weight`` for the parameter ``name`` (as ``named_parameters`` spells it) of ``root``."""
        return f"{self.root_name(root)}.{name}"


def plain(name: str) -> str:
    """Hide torch.compile's wrapper level: ``_orig_mod.encoder`` -> ``encoder``."""
    return ".".join(p for p in name.split(".") if p != "_orig_mod")


def _guess_name(obj: Any) -> Optional[str]:
    """The user's variable name for ``obj`` (``model``, ``self.encoder``) from the live frames."""
    f = sys._getframe(1)
    depth = 0
    while f is not None and depth < 40:
        depth += 1
        if not is_internal(f.f_code.co_filename):
            for scope in (f.f_locals, f.f_globals):
                for name, value in list(scope.items()):
                    if value is obj and not name.startswith("_") and name not in ("self", "cls"):
                        return name
            me = f.f_locals.get("self")
            if me is not None and me is not obj:
                for name, value in list(getattr(me, "__dict__", {}).items()):
                    if value is obj:
                        return f"self.{name}"
                mods = getattr(me, "_modules", None)   # the user's nn.Module children
                if isinstance(mods, dict):
                    for name, value in mods.items():
                        if value is obj:
                            return f"self.{name}"
        f = f.f_back
    return None
