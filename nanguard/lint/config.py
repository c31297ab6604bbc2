"""`[tool.nanguard.lint]` in pyproject.toml, and rule selection (`select`/`ignore`).

Options (hyphens or underscores), all optional:

    [tool.nanguard.lint]
    select = ["NG"]                 # codes, prefixes ("NG1", "NG30"), rule names, or "ALL"
    extend-select = []
    ignore = ["NG801"]              # wins over select
    exclude = [...]                 # replaces the default excludes (gitignore syntax)
    extend-exclude = ["legacy/"]    # adds to them
    per-file-ignores = { "tests/*" = ["NG401"] }
    respect-gitignore = true

Patterns are relative to the directory holding the pyproject.toml.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanguard.lint.rules import BY_NAME, RULES

# ruff's defaults: tool caches, virtual environments, build output.
DEFAULT_EXCLUDE = [
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
]

_KNOWN_KEYS = {"select", "extend-select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
               "respect-gitignore"}


class ConfigError(ValueError):
    """A bad option value or an unreadable configuration file (exit status 2)."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    respect_gitignore: bool = True
    root: Path = field(default_factory=Path.cwd)
    config_path: Path | None = None

    def enabled(self) -> frozenset[str]:
        return enabled_codes(self.select + self.extend_select, self.ignore)


def _matches(code: str, selector: str) -> bool:
    sel = selector.strip()
    if sel.upper() == "ALL":
        return True
    rule = BY_NAME.get(sel)
    if rule is not None:
        return code == rule.code
    return code.startswith(sel.upper())


def validate_selectors(selectors: Iterable[str], option: str) -> None:
    for sel in selectors:
        s = sel.strip()
        if not s:
            continue
        if s.upper() == "ALL" or s in BY_NAME or any(code.startswith(s.upper()) for code in RULES):
            continue
        raise ConfigError(f"{option}: unknown rule selector {sel!r} (see `nanguard lint --list-rules`)")


def enabled_codes(select: Iterable[str], ignore: Iterable[str]) -> frozenset[str]:
    """Rules matched by some `select` entry and by no `ignore` entry (ignore wins)."""
    select, ignore = list(select), list(ignore)
    return frozenset(code for code in RULES
                     if any(_matches(code, s) for s in select) and not any(_matches(code, i) for i in ignore))


def split_codes(value: str | None) -> list[str]:
    """`"NG1,NG301 NG4"` -> ['NG1', 'NG301', 'NG4']."""
    if not value:
        return []
    return [v for v in value.replace(",", " ").split() if v]


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError(
                f"{path}: reading pyproject.toml on Python {sys.version_info.major}.{sys.version_info.minor} "
                "needs `tomli` (pip install tomli), or pass options on the command line with --isolated"
            ) from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.nanguard.lint] table.

    Like ruff, a pyproject.toml without the table does not stop the search. The check is
    textual first, so unrelated pyproject files are not parsed.
    """
    current = start.resolve()
    for directory in [current] + list(current.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "nanguard" in text:
                table = _load_toml(candidate).get("tool", {}).get("nanguard", {}).get("lint")
                if table is not None:
                    return candidate
    return None


def _str_list(value: Any, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        return split_codes(value) if key in ("select", "extend-select", "ignore") else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.nanguard.lint] {key} must be a list of strings")
    return list(value)


def load_settings(config: Path | None = None, start: Path | None = None, isolated: bool = False) -> Settings:
    """Settings from `config` (or the nearest pyproject.toml above `start`), else defaults."""
    if isolated:
        return Settings(root=Path.cwd())
    path = config if config is not None else find_config(start or Path.cwd())
    if path is None:
        return Settings(root=Path.cwd())
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    data = _load_toml(path)
    table = data.get("tool", {}).get("nanguard", {}).get("lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.nanguard.lint] must be a table")
    settings = Settings(root=path.parent.resolve(), config_path=path)
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in _KNOWN_KEYS:
            raise ConfigError(f"{path}: unknown option [tool.nanguard.lint] {raw_key!r} "
                              f"(known: {', '.join(sorted(_KNOWN_KEYS))})")
        if key == "respect-gitignore":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: respect-gitignore must be true or false")
            settings.respect_gitignore = value
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: per-file-ignores must be a table of pattern = [codes]")
            pfi = {}
            for pattern, codes in value.items():
                codes_list = _str_list(codes, "per-file-ignores", path)
                validate_selectors(codes_list, f"{path}: per-file-ignores")
                pfi[str(pattern)] = codes_list
            settings.per_file_ignores = pfi
        else:
            items = _str_list(value, key, path)
            if key in ("select", "extend-select", "ignore"):
                validate_selectors(items, f"{path}: {key}")
            setattr(settings, key.replace("-", "_"), items)
    return settings


def relative_to_root(path: Path, root: Path) -> str:
    """`path` relative to `root` in POSIX form, or the absolute path when outside it."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix().lstrip("/")
