"""Run a whole program under detection, as ``python script.py`` / ``python -m pkg.mod`` would.

``sys.argv``, ``sys.path[0]`` (the script's folder, or the current folder for ``-m``, set
before the module is looked up), ``__name__ == "__main__"``, an absolute ``__file__``, relative
imports (``-m``) and the exit status behave as with the interpreter. Each framework the
program imports gets its detector (see `nanguard.run.backends`).

Four outcomes, each with its own ``status`` in the JSON and its own exit status, so a caller
never mistakes a crash for a finding: ``found`` (exit 1, the report on stderr),
``script_error`` (the program raised: its traceback as python prints it, exit 3), ``exited``
(the program called ``sys.exit`` with a non-zero status: that status) and ``clean`` (exit 0).
Status 2 is kept for nanguard's own usage errors. Framework-free: nothing here imports
torch, TensorFlow or JAX.
"""

from __future__ import annotations

import io
import json
import os
import pkgutil
import runpy
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import List, Optional, TextIO

import nanguard
from nanguard.core.report import not_found_dict
from nanguard.errors import NonFiniteError
from nanguard.run import ranks
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


# The exit statuses of `nanguard run` besides 0, 2 (usage, `nanguard.run.cli`) and the
# program's own ``sys.exit`` status.
EXIT_FOUND = 1
EXIT_SCRIPT_ERROR = 3


@dataclass
class RunOptions:
    target: str
    args: List[str]
    module: bool = False
    check: str = "both"
    exhaustive: bool = False
    json_path: Optional[str] = None
    color: Optional[bool] = None     # None: only when stderr is a terminal
    json_dir: Optional[str] = None   # under torchrun: rank<R>.json per rank and merged.json (`ranks.py`)
    merge_timeout_s: float = 300.0   # how long rank 0 waits for the other ranks' reports


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


def _error_line(exc: BaseException) -> str:
    """``ValueError: boom``: the last line python prints for an uncaught exception."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]


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
        argv0 = opts.target
        path0 = os.getcwd()             # python -m: the current folder, looked in first
    else:
        if not os.path.exists(opts.target):
            raise UsageError(f"can't open file {opts.target!r}: no such file")
        if os.path.isdir(opts.target):
            raise UsageError(f"{opts.target!r} is a directory; give a .py file or use -m package.module")
        argv0 = opts.target
        path0 = os.path.dirname(os.path.abspath(opts.target))

    saved_argv, saved_path = sys.argv[:], sys.path[:]
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    try:
        if opts.module:
            _require_module(opts.target)   # with sys.path[0] set: `-m mypkg.train` from the project folder
        already = frameworks_already_loaded(program_source(opts.target, opts.module))
    except BaseException:
        sys.path[:] = saved_path
        raise

    # Under torchrun every rank keeps running after its first finding: a rank that raised would
    # leave the others waiting in their next collective, and would never see what they see.
    job = ranks.from_env()
    detectors = Detectors(check=opts.check, exhaustive=opts.exhaustive, mode="record" if job else "raise")
    sys.argv = [argv0] + list(opts.args)
    status, outcome, exit_code, error = 0, "clean", 0, None
    try:
        with detectors:
            for backend in already:
                detectors.enter(backend)
            if opts.module:
                runpy.run_module(opts.target, run_name="__main__", alter_sys=True)
            else:
                _run_script(opts.target)
    except SystemExit as exc:
        status = exit_code = _exit_status(exc.code, stderr)
        outcome = "exited" if status else "clean"
    except NonFiniteError as exc:
        if exc.report is None or not any(exc.report is r for r in detectors.reports()):
            # raised by nanguard outside the detectors (a GradGuard with policy "raise"): a finding too
            traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__), file=stderr)
            status, outcome, exit_code, error = EXIT_FOUND, "found", None, _error_line(exc)
        else:
            status, outcome, exit_code = EXIT_FOUND, "found", None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the program's own error: show it as python would
        traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__), file=stderr)
        status, outcome, exit_code, error = EXIT_SCRIPT_ERROR, "script_error", None, _error_line(exc)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path

    found = detectors.reports()
    report = found[0] if found else None
    if report is not None:
        # a finding wins over what the program did next (a handled error, a crash, its own exit)
        print(report.format(color=opts.color), file=stderr)
        status, outcome = EXIT_FOUND, "found"
    if report is not None:
        payload = {**report.to_dict(), "status": outcome, "exit_code": exit_code}
    else:
        payload = not_found_dict(status=outcome, exit_code=exit_code, error=error)
    if opts.json_path:
        path = opts.json_path if job is None else _per_rank(opts.json_path, job[0])
        try:
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(payload, fh, indent=2, allow_nan=False)
                fh.write("\n")
        except OSError as err:
            print(f"nanguard run: could not write {path}: {err}", file=stderr)
            status = status or EXIT_FOUND
    json_dir = opts.json_dir or os.environ.get("NANGUARD_JSON_DIR")
    if job is not None and json_dir:
        status = _share(json_dir, job, payload, opts.merge_timeout_s, stderr) or status
    return status


def _per_rank(path: str, rank: int) -> str:
    """``report.json`` -> ``report.rank1.json``: every rank of a torchrun job writes its own."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank}{ext or '.json'}"


def _share(directory: str, job: tuple, payload: dict, timeout_s: float, stderr: TextIO) -> int:
    """Write this rank's report into ``directory``; rank 0 merges them (`nanguard.run.ranks`)."""
    rank, world = job
    try:
        ranks.write_rank(directory, rank, world, payload)
        if rank == 0:
            merged = ranks.collect(directory, world, timeout_s)
            print(f"nanguard: {merged['message']}\n  (every rank: {os.path.join(directory, ranks.MERGED)})",
                  file=stderr)
        else:
            ranks.wait_for_merged(directory, timeout_s)
    except OSError as err:
        print(f"nanguard run: could not write the reports into {directory}: {err}", file=stderr)
        return EXIT_FOUND
    return 0


def _run_script(target: str) -> None:
    """``python script.py``: a fresh ``__main__`` whose ``__file__`` (and code filename) is the
    absolute path, as python 3.9+ gives it (a script that changes folder and then opens a file
    beside itself relies on it), while ``sys.argv[0]`` stays as typed. ``runpy.run_path`` would
    make both the path as typed; it still runs what is not a source or compiled file (a zip)."""
    path = os.path.abspath(target)
    if pkgutil.get_importer(path) is not None:  # a zip application: its __main__.py
        runpy.run_path(path, run_name="__main__")
        return
    with io.open_code(path) as fh:
        code = pkgutil.read_code(fh)
    if code is None:
        with io.open_code(path) as fh:
            code = compile(fh.read(), path, "exec")
    main = ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _require_module(name: str) -> None:
    """A usage error unless ``name`` can be found as ``python -m`` would find it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise UsageError(f"no module named {name!r}")
