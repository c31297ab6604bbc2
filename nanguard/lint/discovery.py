"""Which files to lint: recursive discovery with gitignore-style excludes.

Patterns follow `.gitignore` syntax (`*`, `**`, `?`, `[abc]`, a leading `/` or an inner `/`
anchors to the pattern's base directory, a trailing `/` matches directories only, `!`
re-includes, the last matching pattern wins). Sources of patterns, in order: the
configured `exclude` + `extend-exclude` (base: the config's directory), then every
`.gitignore` from the repository top down to the directory being walked (base: its own
directory), plus `.git/info/exclude`.

Paths named explicitly on the command line are always linted, as with ruff and flake8:
excludes apply to what discovery finds beneath them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    source: str


def _translate(body: str) -> str:
    """gitignore glob -> regex over a POSIX relative path (without anchors)."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "*":
            if body.startswith("**", i):
                before_ok = i == 0 or body[i - 1] == "/"
                after = i + 2
                if before_ok and (after == n or body[after] == "/"):
                    if after == n:
                        out.append(".*")
                        i = after
                    else:
                        out.append("(?:.*/)?")
                        i = after + 1
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = body.find("]", i + 2 if body[i + 1:i + 2] in ("!", "^") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                inner = body[i + 1:j]
                if inner[:1] in ("!", "^"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(body[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_pattern(line: str) -> Pattern | None:
    """One gitignore line -> Pattern (None for blanks and comments)."""
    text = line.rstrip("\n").rstrip("\r")
    if not text.endswith("\\ "):
        text = text.rstrip(" ")
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    if negated or text.startswith(("\\!", "\\#")):
        text = text[1:]
    dir_only = text.endswith("/")
    text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    text = text.lstrip("/")
    body = _translate(text)
    regex = ("^" if anchored else "^(?:.*/)?") + body + "$"
    return Pattern(re.compile(regex), negated, dir_only, line.strip())


def compile_patterns(lines: Iterable[str]) -> list[Pattern]:
    return [p for p in (compile_pattern(line) for line in lines) if p is not None]


class IgnoreStack:
    """Pattern groups, each with its base directory; evaluated last-match-wins like git."""

    def __init__(self, groups: list[tuple[Path, list[Pattern]]] | None = None) -> None:
        self.groups: list[tuple[Path, list[Pattern]]] = groups or []

    def pushed(self, base: Path, patterns: list[Pattern]) -> IgnoreStack:
        return IgnoreStack(self.groups + [(base, patterns)]) if patterns else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False
        for base, patterns in self.groups:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if rel in ("", "."):
                continue
            for p in patterns:
                if p.dir_only and not is_dir:
                    continue
                if p.regex.match(rel):
                    verdict = not p.negated
        return verdict


def _read_ignore_file(path: Path) -> list[Pattern]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return compile_patterns(fh)
    except OSError:
        return []


def _repo_top(directory: Path) -> Path | None:
    for d in [directory] + list(directory.parents):
        if (d / ".git").exists():
            return d
    return None


class Discovery:
    """Expand command-line paths into the files to lint."""

    def __init__(self, exclude: list[str], root: Path, respect_gitignore: bool = True,
                 extensions: tuple[str, ...] = (".py", ".pyi", ".ipynb"), force_exclude: bool = False) -> None:
        self.root = root.resolve()
        self.base = IgnoreStack([(self.root, compile_patterns(exclude))])
        self.respect_gitignore = respect_gitignore
        self.extensions = extensions
        # Apply the excludes to files named on the command line too (pre-commit names every file).
        self.force_exclude = force_exclude
        self._dir_cache: dict[Path, list[Pattern]] = {}

    def _gitignore(self, directory: Path) -> list[Pattern]:
        if directory not in self._dir_cache:
            patterns = _read_ignore_file(directory / ".gitignore")
            if (directory / ".git").is_dir():
                patterns = _read_ignore_file(directory / ".git" / "info" / "exclude") + patterns
            self._dir_cache[directory] = patterns
        return self._dir_cache[directory]

    def _stack_for(self, directory: Path) -> IgnoreStack:
        """Excludes plus every .gitignore from the repository top down to `directory`."""
        stack = self.base
        if not self.respect_gitignore:
            return stack
        top = _repo_top(directory)
        if top is None:
            return stack
        chain = [directory] + [p for p in directory.parents if p == top or top in p.parents]
        for d in reversed(chain):
            stack = stack.pushed(d, self._gitignore(d))
        return stack

    def files(self, paths: Iterable[Path]) -> list[Path]:
        """Files to lint, sorted and without duplicates. Missing paths raise FileNotFoundError."""
        seen = set()
        out: list[Path] = []
        for given in paths:
            if not given.exists():
                raise FileNotFoundError(str(given))
            absolute = Path(os.path.abspath(given))
            if absolute.is_file():
                if self.force_exclude and self._excluded_file(absolute):
                    continue
                candidates = [given]
            else:
                stack = self._stack_for(absolute)
                if self._inside_ignored(absolute, stack):
                    # The user named an ignored directory (e.g. a vendored package inside
                    # .venv): lint it, keeping only the configured excludes and the
                    # .gitignore files inside it.
                    stack = self.base.pushed(absolute, self._gitignore(absolute)) \
                        if self.respect_gitignore else self.base
                candidates = list(self._walk(given, stack))
            for c in candidates:
                key = os.path.abspath(c)
                if key not in seen:
                    seen.add(key)
                    out.append(c)
        return sorted(out, key=lambda p: str(p))

    def _excluded_file(self, absolute: Path) -> bool:
        """Would a directory walk skip this file (excluded itself, or under an excluded directory)?"""
        if self.base.ignored(absolute, False):
            return True
        parents = [p for p in absolute.parents if p == self.root or self.root in p.parents]
        return any(self.base.ignored(d, True) for d in parents if d != self.root)

    def _inside_ignored(self, directory: Path, stack: IgnoreStack) -> bool:
        top = _repo_top(directory)
        if top is None:
            return False
        chain = [directory] + [p for p in directory.parents if top in p.parents]
        return any(stack.ignored(d, True) for d in chain)

    def _walk(self, directory: Path, stack: IgnoreStack) -> Iterable[Path]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = directory / entry.name
            absolute = Path(os.path.abspath(path))
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()
            except OSError:
                continue
            if is_dir:
                if stack.ignored(absolute, True):
                    continue
                inner = stack.pushed(absolute, self._gitignore(absolute)) if self.respect_gitignore else stack
                yield from self._walk(path, inner)
            elif is_file and entry.name.endswith(self.extensions) and not stack.ignored(absolute, False):
                yield path
