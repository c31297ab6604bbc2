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
