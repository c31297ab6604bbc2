"""Names of a backend package looked up in its pillars' subpackages on first use."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, MutableMapping, Sequence, Tuple


def lazy_names(package: str, namespace: MutableMapping[str, Any],
               pillars: Dict[str, Sequence[str]]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name in ``pillars[sub]`` comes from
    ``package.sub`` and is stored in ``namespace`` (the module's globals) once looked up."""
    where = {name: f"{package}.{sub}" for sub, names in pillars.items() for name in names}
    public = [name for names in pillars.values() for name in names]

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> List[str]:
        return sorted(set(namespace) | set(public))

    return getattr_, dir_


def require(module: str, framework: str, extra: str, pillars: str) -> None:
    """Import ``module`` (the framework), or raise an ImportError that names the extra to install."""
    try:
        importlib.import_module(module)
    except ImportError as error:  # pragma: no cover - exercised in a subprocess by tests/core
        raise ImportError(
            f"nanguard's {framework} pillars ({pillars}) need {framework}, which is not installed. "
            f"Install it with `pip install 'nanguard[{extra}]'` (or your own {framework} build), "
            "or use only `nanguard lint`, which needs no framework."
        ) from error


def load_ops(package: str, namespace: MutableMapping[str, Any], backend: str) -> List[str]:
    """Import the safe ops of ``backend`` from the family modules of ``package`` (a backend's
    ``ops`` package) into ``namespace``, as the op specification lists them; their names."""
    from nanguard.core.opspec import op_names, spec

    names = list(op_names(backend))
    for name in names:
        namespace[name] = getattr(importlib.import_module(f"{package}.{spec(name).family}"), name)
    return names


def backend_names(backend: str, namespace: MutableMapping[str, Any], detector: Sequence[str],
                  guard: Sequence[str]) -> Tuple[List[str], Callable[[str], Any], Callable[[], List[str]]]:
    """``(__all__, __getattr__, __dir__)`` of the backend package ``nanguard.<backend>``: its
    safe ops (as the op specification lists them), ``detector`` and ``guard`` names, each
    looked up in its pillar on first use, and ``NonFiniteError``. ``_OPS`` holds the ops."""
    from nanguard.core.opspec import op_names

    pillars: Dict[str, Sequence[str]] = {"ops": op_names(backend), "detector": tuple(detector),
                                         "guard": tuple(guard)}
    namespace["_OPS"] = pillars["ops"]
    public = [name for names in pillars.values() for name in names] + ["NonFiniteError"]
    return (public, *lazy_names(f"nanguard.{backend}", namespace, pillars))
