"""Looking up a framework's private API once, and saying clearly when a version lacks it.

nanguard's detector, guard and safe ops are built on a few private framework APIs (dispatch
mode stacks, autograd internals, tracing hooks). Each backend's ``_compat`` module looks every
one of them up through a `PrivateAPI`, so that a framework release that renames or removes
one breaks one line, and so that the user gets an `UnsupportedVersionError` naming the
feature and the versions instead of an ``AttributeError`` deep in a hook.

A symbol that is missing is bound to a `Missing` stand-in: importing works and unrelated
features keep working; calling it, reading an attribute of it or subclassing it raises the
error. ``bool(missing)`` is False, so a caller can also feature-detect without raising.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from nanguard.errors import UnsupportedVersionError

Names = Union[str, Sequence[str]]


class Missing:
    """Stands in for a private symbol this framework version lacks; raises when used."""

    def __init__(self, message: str) -> None:
        object.__setattr__(self, "_message", message)

    def error(self) -> UnsupportedVersionError:
        return UnsupportedVersionError(object.__getattribute__(self, "_message"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):   # copy, pickle and inspect probe dunders: not a use
            raise AttributeError(name)
        raise self.error()

    def __bool__(self) -> bool:
        return False

    def __mro_entries__(self, bases: Tuple[Any, ...]) -> Tuple[type, ...]:
        # ``class Mode(compat.TorchDispatchMode)`` still defines the class (the module imports);
        # making an instance raises.
        missing = self

        def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
            raise missing.error()

        return (type("MissingPrivateBase", (), {"__new__": __new__}),)

    def __repr__(self) -> str:
        return f"<missing: {object.__getattribute__(self, '_message')}>"


def _resolve(owner: Any, path: str) -> Any:
    for part in path.split("."):
        owner = getattr(owner, part)
    return owner


class PrivateAPI:
    """The private API of one framework (``torch``, ``tensorflow``, ``jax``) at its installed
    version. Each method tries the spellings in ``names`` in order (newest first, then the
    spellings of older releases) and returns the first found."""

    def __init__(self, framework: str, version: str) -> None:
        self.framework = framework
        self.version = version
        self._lazy: Dict[str, Any] = {}

    def message(self, feature: str, since: str) -> str:
        return (f"nanguard needs {feature} from {self.framework} {since}+; you have "
                f"{self.framework} {self.version}")

    def missing(self, feature: str, since: str) -> Missing:
        return Missing(self.message(feature, since))

    def attr(self, owner: Any, names: Names, feature: str, since: str) -> Any:
        """The first of the dotted ``names`` found on ``owner``, or a `Missing`."""
        found = self.optional(owner, names)
        return self.missing(feature, since) if found is None else found

    def optional(self, owner: Any, names: Names) -> Any:
        """The first of the dotted ``names`` found on ``owner``, or None (for the features that
        degrade quietly where a version lacks their API)."""
        for name in [names] if isinstance(names, str) else names:
            try:
                return _resolve(owner, name)
            except (AttributeError, ImportError, RuntimeError):
                continue
        return None

    def module(self, names: Names, feature: str, since: str, needs: Sequence[str] = ()) -> Any:
        """The first importable module of ``names`` that has every attribute in ``needs``, or a
        `Missing` (a module that lost an attribute nanguard reads is as unusable as no module)."""
        found = self.optional_module(names, needs)
        return self.missing(feature, since) if found is None else found

    def optional_module(self, names: Names, needs: Sequence[str] = ()) -> Optional[ModuleType]:
        for name in [names] if isinstance(names, str) else names:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            if all(hasattr(mod, attr) for attr in needs):
                return mod
        return None

    def lazy(self, key: str, lookup: Callable[[], Any]) -> Any:
        """``lookup()`` once, on first use: for the private modules that are slow to import
        (``torch._dynamo``) and that only some features need. A failed lookup is None."""
        if key not in self._lazy:
            try:
                self._lazy[key] = lookup()
            except Exception:   # a framework that cannot import it: the feature degrades
                self._lazy[key] = None
        return self._lazy[key]
