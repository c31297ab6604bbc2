"""The package's metadata: a license people and tools can read, a version written once, the
typing marker shipped, and a build that needs no deprecated setuptools form. Reads files only
(no framework, no build)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    tomllib = pytest.importorskip("tomli")

import nanguard

REPO = Path(__file__).resolve().parents[2]
URL = "https://github.com/nanguard/nanguard"


@pytest.fixture(scope="module")
def pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def test_license_is_an_spdx_string_with_its_full_text(pyproject: dict) -> None:
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"          # PEP 639; the {text = ...} table is deprecated
    assert project.get("license-files") == ["LICENSE"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 170
    # with a license expression, a "License ::" classifier is an error for setuptools >= 77
    assert not any(c.startswith("License ::") for c in project["classifiers"])


def test_build_backend_is_pinned_to_one_that_reads_spdx_licenses(pyproject: dict) -> None:
    build = pyproject["build-system"]
    assert build["build-backend"] == "setuptools.build_meta"
    (requirement,) = build["requires"]
    low = re.search(r">=\s*([\d.]+)", requirement)
    high = re.search(r"<\s*([\d.]+)", requirement)
    assert requirement.startswith("setuptools") and low and high, requirement
    assert tuple(int(p) for p in low.group(1).split(".")[:1]) >= (77,)


def test_version_is_written_once(pyproject: dict) -> None:
    project = pyproject["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "nanguard.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", nanguard.__version__)
    assert f"## [{nanguard.__version__}]" in (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def test_classifiers_and_urls(pyproject: dict) -> None:
    project = pyproject["project"]
    classifiers = project["classifiers"]
    assert "Typing :: Typed" in classifiers
    minimum = re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1)
    assert f"Programming Language :: Python :: 3.{minimum}" in classifiers
    urls = project["urls"]
    assert urls["Homepage"] == URL and urls["Repository"] == URL and urls["Issues"] == f"{URL}/issues"
    assert "CHANGELOG.md" in urls["Changelog"]


def test_py_typed_ships_in_the_package(pyproject: dict) -> None:
    assert (Path(nanguard.__file__).parent / "py.typed").is_file()
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["nanguard"]


def test_runtime_dependencies_are_tomli_on_310_and_no_framework(pyproject: dict) -> None:
    """`nanguard lint` reads `[tool.nanguard.lint]` with tomllib, which Python 3.10 (declared
    supported) lacks: tomli is a dependency there, and nothing else is (no framework)."""
    assert pyproject["project"]["requires-python"] == ">=3.10"
    deps = pyproject["project"]["dependencies"]
    assert deps == ['tomli>=1.1; python_version < "3.11"']
