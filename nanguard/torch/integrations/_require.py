"""The optional frameworks, imported on first use, with the extra to install when missing."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"nanguard's {what} integration needs `{module.split('.')[0]}`, which is not "
            f"installed: `pip install 'nanguard[{extra}]'`"
        ) from error
