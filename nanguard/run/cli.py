"""``nanguard run [options] script.py [args...]`` and ``nanguard run -m package.module [args...]``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn, Optional, Sequence, Tuple

from nanguard.core.options import CHECKS

_DESCRIPTION = """\
Run a Python program unchanged, as python would (sys.argv, sys.path[0], an absolute
__file__, -m from the current folder), under nanguard's detector for each framework it
imports (PyTorch, TensorFlow/Keras, JAX; no flag needed): it stops at the first op, forward
or backward, that turns finite values into NaN or Inf and prints where (op, line, module or
layer) and why.

exit status:
  0  the program ran clean (or the status of its own sys.exit(n), passed through)
  1  a NaN or Inf was found (the report is on stderr, and in --json)
  2  usage error of nanguard run itself
  3  the program raised an uncaught exception (its traceback, as python prints it)
--json PATH writes "status": "found", "clean", "script_error" or "exited" (the program
called sys.exit with a non-zero status), and "exit_code", the program's own status."""

_EPILOG = """\
examples:
  nanguard run train.py --epochs 3
  nanguard run --json report.json -m mypkg.train
  nanguard run --check nan --exhaustive train.py
  torchrun --nproc_per_node 2 -m nanguard run --json-dir reports train.py
  nanguard run --nproc 2 --json-dir reports train.py"""


class _RunParser(argparse.ArgumentParser):
    """One-line errors with status 2, and no stray arguments left for the top-level parser."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"nanguard run: error: {message}\n")
        raise SystemExit(2)

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace: Any = None) -> Tuple[Any, list]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error("unrecognized arguments: " + " ".join(extras))
        return ns, []


def register(subparsers: argparse._SubParsersAction) -> None:
    previous = subparsers._parser_class
    subparsers._parser_class = _RunParser
    try:
        parser = subparsers.add_parser(
            "run", help="run a program under NaN/Inf detection (like python script.py)",
            description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    finally:
        subparsers._parser_class = previous
    parser.add_argument("--check", choices=CHECKS, default="both",
                        help="which values count as a finding (default: both)")
    parser.add_argument("--exhaustive", action="store_true",
                        help="check every op as it runs (slower; also sees values made non-finite and discarded)")
    parser.add_argument("--json", metavar="PATH", dest="json_path",
                        help="also write the outcome as JSON to PATH: the report, or {\"found\": false, \"status\": ...}")
    parser.add_argument("--json-dir", metavar="DIR", dest="json_dir",
                        help="under torchrun (or --nproc): each rank writes DIR/rank<R>.json and rank 0 writes "
                             "DIR/merged.json, which names the first rank to go non-finite (env: NANGUARD_JSON_DIR)")
    parser.add_argument("--nproc", metavar="N", type=int,
                        help="run the program on N processes with torchrun (torch.distributed.run --standalone), "
                             "each under detection, and merge their reports (into --json-dir, or a new folder)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the report (default: when stderr is a terminal)")
    parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                        help="run a module as python -m does; the rest of the line is its arguments")
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="script.py [args ...]",
                        help="the script and its arguments")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.module is not None:
        if args.program:
            return _usage("give either a script or -m MODULE, not both")
        if not args.module:
            return _usage("-m needs a module name, e.g. nanguard run -m package.module")
        target, rest, module = args.module[0], args.module[1:], True
    else:
        if not args.program:
            return _usage("missing the script to run, e.g. nanguard run train.py (or -m package.module)")
        target, rest, module = args.program[0], args.program[1:], False
    if args.nproc is not None:
        if args.nproc < 1:
            return _usage("--nproc needs a number of processes >= 1")
        return _launch(args, target, rest, module)
    # imported here: building the parser (`nanguard lint` does too) must stay cheap
    from nanguard.run.runner import RunOptions, UsageError, run

    color = {"auto": None, "always": True, "never": False}[args.color]
    if color is None and os.environ.get("NO_COLOR"):
        color = False
    opts = RunOptions(target=target, args=rest, module=module, check=args.check, exhaustive=args.exhaustive,
                      json_path=args.json_path, color=color, json_dir=args.json_dir)
    try:
        return run(opts)
    except UsageError as err:
        return _usage(str(err))


def _launch(args: argparse.Namespace, target: str, rest: list, module: bool) -> int:
    """``nanguard run --nproc N``: torchrun runs ``nanguard run`` on N ranks; rank 0 merges."""
    import json
    import subprocess
    import tempfile

    import nanguard
    from nanguard.run import ranks

    json_dir = args.json_dir or tempfile.mkdtemp(prefix="nanguard-ranks-")
    inner = ["--check", args.check, "--json-dir", json_dir, "--color", args.color]
    if args.exhaustive:
        inner.append("--exhaustive")
    inner += (["-m", target] if module else [target]) + list(rest)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(args.nproc),
               "-m", "nanguard", "run", *inner]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(nanguard.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    status = subprocess.call(command, env=env)
    merged_path = os.path.join(json_dir, ranks.MERGED)
    try:
        with open(merged_path, encoding="utf-8") as fh:
            merged = json.load(fh)
    except (OSError, ValueError):
        sys.stderr.write(f"nanguard run: the ranks wrote no merged report into {json_dir} (torchrun status {status})\n")
        return status or 1
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(merged, fh, indent=2)
            fh.write("\n")
    if merged.get("found"):
        return 1
    return status


def _usage(message: str) -> int:
    sys.stderr.write(f"nanguard run: error: {message}\n")
    return 2
