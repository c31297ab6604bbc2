"""`nanguard._private`: a private framework API is looked up once, older spellings are tried,
and a missing one raises `UnsupportedVersionError` when used, never at lookup."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

from nanguard._private import Missing, PrivateAPI
from nanguard.errors import UnsupportedVersionError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
MESSAGE = "nanguard needs the frobnicator from fakeframe 3.1+; you have fakeframe 2.0"


def _framework() -> types.SimpleNamespace:
    inner = types.SimpleNamespace(_old_name=lambda: "old")
    return types.SimpleNamespace(_C=inner, present=lambda x: x + 1)


def test_a_missing_symbol_raises_the_version_error_when_called_not_when_looked_up() -> None:
    api = PrivateAPI("fakeframe", "2.0")
    found = api.attr(_framework(), "_C._gone", "the frobnicator", "3.1")
    assert isinstance(found, Missing) and not found
    with pytest.raises(UnsupportedVersionError) as raised:
        found(1)
    assert str(raised.value) == MESSAGE
    with pytest.raises(UnsupportedVersionError, match="fakeframe 3.1"):
        found.impl   # reading an attribute of a missing module or object raises too


def test_the_first_spelling_found_is_used() -> None:
    api = PrivateAPI("fakeframe", "2.0")
    assert api.attr(_framework(), ("_C._new_name", "_C._old_name"), "f", "1.0")() == "old"
    assert api.attr(_framework(), "present", "f", "1.0")(1) == 2
    assert api.optional(_framework(), "_C._new_name") is None


def test_a_class_built_on_a_missing_base_is_defined_but_cannot_be_made() -> None:
    base = PrivateAPI("fakeframe", "2.0").attr(_framework(), "Mode", "the frobnicator", "3.1")

    class Mode(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            pass

    with pytest.raises(UnsupportedVersionError, match="you have fakeframe 2.0"):
        Mode()


def test_a_module_without_a_needed_attribute_counts_as_missing() -> None:
    api = PrivateAPI("fakeframe", "2.0")
    assert api.module("json", "f", "1.0", needs=("dumps",)).dumps({}) == "{}"
    assert not api.module("json", "f", "1.0", needs=("_no_such_function",))
    assert not api.module("nanguard_no_such_module", "f", "1.0")


def test_a_lazy_lookup_runs_once_and_a_failure_is_none() -> None:
    api = PrivateAPI("fakeframe", "2.0")
    calls = []
    assert api.lazy("k", lambda: calls.append(1) or "v") == "v"
    assert api.lazy("k", lambda: calls.append(1) or "w") == "v"
    assert calls == [1]
    assert api.lazy("broken", lambda: 1 / 0) is None


def _floor_in(path: Path) -> str:
    """The ``FLOOR = "..."`` of a backend's compat module, read without importing the backend."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["FLOOR"]:
            return str(ast.literal_eval(node.value))
    raise AssertionError(f"no FLOOR in {path}")


@pytest.mark.parametrize("backend, packages", [("torch", ("torch",)), ("tf", ("tensorflow", "tensorflow-cpu")),
                                               ("jax", ("jax",))])
def test_the_version_an_error_names_is_the_floor_pyproject_declares(backend: str, packages: tuple) -> None:
    # the error says "from torch X+": X must be what `pip install 'nanguard[torch]'` promises
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors = {req.split(">=")[1].split(",")[0].strip() for reqs in extras.values() for req in reqs
              if req.split(">=")[0].strip() in packages}
    assert floors == {_floor_in(REPO / "nanguard" / backend / "_compat.py")}
