"""Which detectors a program needs: one per framework it imports, entered when it is imported.

A framework the program imports is found two ways: in the program's own import statements
(for a framework already loaded in this process, e.g. by a test harness), and by an import
hook that enters the framework's detector the moment its top-level package finishes
importing, wherever the import happens (the script, a helper module, Keras importing
TensorFlow). Nothing runs before the framework is imported, so no op is missed; a program
that imports no framework runs with no detector at all, and imports none.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any, Callable, Dict, List, Optional

# top-level package -> nanguard backend (``nanguard.<backend>.detector``)
FRAMEWORKS: Dict[str, str] = {"torch": "torch", "tensorflow": "tf", "jax": "jax"}


def imported_names(source: str) -> set:
    """The top-level package of every absolute import in ``source`` (``import torch.nn`` -> torch)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def program_source(target: str, module: bool) -> str:
    """The program's own source text ('' when it cannot be read, e.g. a compiled module)."""
    try:
        if module:
            spec = importlib.util.find_spec(target)
            path = spec.origin if spec is not None else None
        else:
            path = target
        if not path or not path.endswith(".py"):
            return ""
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, ImportError, ValueError, UnicodeDecodeError):
        return ""


def frameworks_already_loaded(source: str) -> List[str]:
    """Backends of the frameworks the program imports that this process has imported already."""
    names = imported_names(source)
    if "keras" in names:
        names.add("tensorflow")  # Keras 3 on the TensorFlow backend; only counted if TF is loaded
    return [backend for package, backend in FRAMEWORKS.items() if package in names and package in sys.modules]


def make_detector(backend: str, check: str, exhaustive: bool, mode: str = "raise") -> Optional[Any]:
    """``nanguard.<backend>.detector.detect(check=..., mode=..., exhaustive=...)``; None when this
    nanguard has no detector for that framework yet."""
    try:
        detector = importlib.import_module(f"nanguard.{backend}.detector")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith(f"nanguard.{backend}"):
            return None
        raise
    return detector.detect(check=check, mode=mode, exhaustive=exhaustive)


class _NotifyingLoader(importlib.abc.Loader):
    """The framework's own loader, plus a call once the package has finished executing."""

    def __init__(self, loader: Any, done: Callable[[], None]) -> None:
        self._loader, self._done = loader, done

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._done()

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, resource readers ...
        return getattr(self._loader, name)


class ImportHook(importlib.abc.MetaPathFinder):
    """Calls ``on_import(backend)`` after a watched framework's top-level package is imported."""

    def __init__(self, on_import: Callable[[str], None]) -> None:
        self._on_import = on_import
        self._finding = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        backend = FRAMEWORKS.get(name)
        if backend is None or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _NotifyingLoader(spec.loader, lambda: self._on_import(backend))
        return spec


class Detectors:
    """The detectors of one run: entered as their frameworks appear, exited in reverse order."""

    def __init__(self, check: str, exhaustive: bool, mode: str = "raise") -> None:
        self._check, self._exhaustive, self._mode = check, exhaustive, mode
        self._stack = contextlib.ExitStack()
        self._hook = ImportHook(self.enter)
        self.entered: Dict[str, Any] = {}

    def enter(self, backend: str) -> None:
        if backend in self.entered:
            return
        detector = make_detector(backend, self._check, self._exhaustive, self._mode)
        self.entered[backend] = detector
        if detector is not None:
            self._stack.enter_context(detector)

    def __enter__(self) -> "Detectors":
        sys.meta_path.insert(0, self._hook)
        return self

    def __exit__(self, *exc: Any) -> bool:
        try:
            if self._hook in sys.meta_path:
                sys.meta_path.remove(self._hook)
        finally:
            self._stack.__exit__(*exc)
        return False

    def reports(self) -> List[Any]:
        return [d.report for d in self.entered.values() if d is not None and d.report is not None]


__all__ = ["Detectors", "FRAMEWORKS", "ImportHook", "frameworks_already_loaded", "imported_names",
           "make_detector", "program_source"]
