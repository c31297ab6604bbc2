"""Run a whole program under detection, as ``python script.py`` / ``python -m pkg.mod`` would.

``sys.argv``, ``sys.path[0]``, ``__name__ == "__main__"``, relative imports (``-m``) and the
exit status behave as with the interpreter. Each framework the program imports gets its
detector (see `nanguard.run.backends`). On a detection the report goes to stderr (and to
``--json``) and the status is 1; otherwise the status is the program's own. Framework-free:
nothing here imports torch, TensorFlow or JAX.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import List, Optional, TextIO

import nanguard
from nanguard.core.report import not_found_dict
from nanguard.errors import NonFiniteError
from nanguard.run.backends import Detectors, frameworks_already_loaded, program_source

_NANGUARD_DIR = os.path.dirname(os.path.abspath(nanguard.__file__)) + os.sep
_STORIES_DIR = os.path.join(_NANGUARD_DIR, "stories") + os.sep
_LAUNCH = (os.path.abspath(runpy.__file__),)


def _is_launch_machinery(filename: str) -> bool:
    """A frame of nanguard itself (not its shipped story programs), runpy or the import system."""
    if filename.startswith("<frozen"):
        return True
    path = os.path.abspath(filename)
    return (path.startswith(_NANGUARD_DIR) and not path.startswith(_STORIES_DIR)) or path in _LAUNCH


class UsageError(Exception):
    """A problem with the command line itself (status 2)."""


@dataclass
class RunOptions:
    target: str
    args: List[str]
    module: bool = False
    check: str = "both"
    exhaustive: bool = False
    json_path: Optional[str] = None
    color: Optional[bool] = None     # None: only when stderr is a terminal


def _exit_status(code: object, stderr: TextIO) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code
    print(code, file=stderr)
    return 1


def _user_traceback(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """Drop the leading frames of nanguard and runpy so the traceback starts in the program."""
    while tb is not None and _is_launch_machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def run(opts: RunOptions, stderr: Optional[TextIO] = None) -> int:
    """Run the program; return the exit status ``nanguard run`` should end with."""
    stderr = stderr if stderr is not None else sys.stderr
    if opts.module:
        if not opts.target or opts.target.startswith("-"):
            raise UsageError("-m needs a module name, e.g. nanguard run -m package.module")
        import importlib.util
        try:
            spec = importlib.util.find_spec(opts.target)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise UsageError(f"no module named {opts.target!r}")
        argv0 = opts.target
        path0 = os.getcwd()
    else:
        if not os.path.exists(opts.target):
            raise UsageError(f"can't open file {opts.target!r}: no such file")
        if os.path.isdir(opts.target):
            raise UsageError(f"{opts.target!r} is a directory; give a .py file or use -m package.module")
        argv0 = opts.target
        path0 = os.path.dirname(os.path.abspath(opts.target))

    detectors = Detectors(check=opts.check, exhaustive=opts.exhaustive)
    already = frameworks_already_loaded(program_source(opts.target, opts.module))
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [argv0] + list(opts.args)
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    status = 0
    try:
        with detectors:
            for backend in already:
                detectors.enter(backend)
            if opts.module:
                runpy.run_module(opts.target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(opts.target, run_name="__main__")
    except SystemExit as exc:
        status = _exit_status(exc.code, stderr)
    except NonFiniteError as exc:
        if exc.report is None or not any(exc.report is r for r in detectors.reports()):
            traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__), file=stderr)
            status = 1
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the program's own error: show it as python would, status 1
        traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__), file=stderr)
        status = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path

    found = detectors.reports()
    report = found[0] if found else None
    if report is not None:
        print(report.format(color=opts.color), file=stderr)
        status = 1
    if opts.json_path:
        payload = report.to_dict() if report is not None else not_found_dict()
        try:
            with open(opts.json_path, "w", encoding="utf-8") as fh:
                json.dump(payload, fh, indent=2, allow_nan=False)
                fh.write("\n")
        except OSError as err:
            print(f"nanguard run: could not write {opts.json_path}: {err}", file=stderr)
            status = status or 1
    return status
