"""Where in the user's program: the innermost frame outside JAX, its libraries and nanguard.

Two sources of frames: an equation's ``source_info`` traceback (recorded by JAX when the
program was traced, so it names the line that *wrote* the op, also for the backward
equations JAX derives from it) and the live Python stack (for eager ops).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, List, Optional

import nanguard
from nanguard.core.location import PASS_THROUGH_FILES, Frame

_NANGUARD_DIR = os.path.dirname(os.path.abspath(nanguard.__file__)) + os.sep
# the seed stories ship inside the package but are user programs: their lines are the finding
_STORIES_DIR = os.path.join(_NANGUARD_DIR, "stories") + os.sep


def _package_dir(name: str) -> Optional[str]:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


# JAX itself and the libraries built on it are machinery: a finding inside optax.adam belongs
# to the user's line that called it.
_LIBRARIES = ("jax", "jaxlib", "optax", "flax", "chex", "equinox", "haiku")


def _internal_dirs() -> tuple:
    dirs = [_package_dir(name) for name in _LIBRARIES]
    return tuple(d for d in dirs if d)


_DIRS: tuple = ()


def is_internal(filename: str) -> bool:
    """True for files of JAX, its libraries, nanguard (outside its stories) and the launchers and
    decorators that pass calls through (`PASS_THROUGH_FILES`)."""
    global _DIRS
    if not _DIRS or len(_DIRS) < len([n for n in _LIBRARIES if n in sys.modules]):
        _DIRS = _internal_dirs()
    path = os.path.abspath(filename)
    if path.startswith(_STORIES_DIR):
        return False
    if path.startswith(_NANGUARD_DIR) or path in PASS_THROUGH_FILES or filename.startswith("<frozen"):
        return True
    return path.startswith(_DIRS)


@dataclass(frozen=True)
class Site:
    """A user frame with the column span of the expression (Python >= 3.11 records it)."""

    frame: Frame
    start_column: int = -1
    end_line: int = -1
    end_column: int = -1

    @property
    def key(self) -> tuple:
        return (self.frame.file, self.frame.line, self.start_column, self.end_line, self.end_column)

    def expression(self) -> str:
        """The source text of the expression (``jnp.sqrt(x)``); the whole line when unknown."""
        code = self.frame.code
        if self.start_column < 0:
            return code
        import linecache
        raw = linecache.getline(self.frame.file, self.frame.line)
        end = self.end_column if self.end_line == self.frame.line else len(raw)
        return raw[self.start_column:end].strip() or code


def traceback_sites(traceback: Any) -> List[Site]:
    """The user frames of a JAX ``source_info`` traceback, innermost first."""
    if traceback is None:
        return []
    from nanguard.jax._compat import source_info_util
    try:
        codes, lastis = traceback.raw_frames()
    except AttributeError:
        return []
    out = []
    for code, lasti in zip(codes, lastis):
        if is_internal(code.co_filename):
            continue
        f = source_info_util.raw_frame_to_frame(code, lasti)
        out.append(Site(Frame(f.file_name, f.start_line, f.function_name), f.start_column, f.end_line,
                        f.end_column))
    return out


def eqn_site(eqn: Any) -> Optional[Site]:
    """The innermost user frame of the line that wrote ``eqn``."""
    sites = traceback_sites(eqn.source_info.traceback)
    return sites[0] if sites else None


def eqn_stack(eqn: Any) -> List[Frame]:
    return [s.frame for s in traceback_sites(eqn.source_info.traceback)]


def live_sites(skip: int = 1) -> List[Site]:
    """The user frames of the running Python stack, innermost first (columns unknown)."""
    out = []
    frame = sys._getframe(skip)
    while frame is not None:
        if not is_internal(frame.f_code.co_filename):
            out.append(Site(Frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)))
        frame = frame.f_back
    return out


_CALL = re.compile(r"^([A-Za-z_][\w.]*)\s*\(")


def api_spelling(site: Optional[Site]) -> Optional[str]:
    """The function the user called at ``site`` as written (``jnp.sqrt``), when it is a call."""
    if site is None or site.start_column < 0:
        return None
    match = _CALL.match(site.expression())
    return match.group(1) if match else None


def base_name(spelling: Optional[str]) -> Optional[str]:
    """``jnp.linalg.norm`` -> ``norm``; ``jax.scipy.special.xlogy`` -> ``xlogy``."""
    return spelling.rsplit(".", 1)[-1] if spelling else None


__all__ = ["Site", "api_spelling", "base_name", "eqn_site", "eqn_stack", "is_internal", "live_sites",
           "traceback_sites"]
