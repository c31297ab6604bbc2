"""``nanguard audit [options] train.py [-- args ...]``: which ops can produce NaN/Inf, before a run.

Framework-free until it runs: building the parser imports nothing; the audit itself needs
PyTorch (``pip install 'nanguard[torch]'``). Exit status: 0 no findings, 1 findings, 2 a
usage error or a script that failed before its first ``backward()``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, NoReturn, Optional, Sequence, Tuple

_DESCRIPTION = """\
Run a training script up to its first backward() (one forward pass of the first step: data
pipeline, model, loss), then report every op that CAN produce NaN/Inf for some finite weights
and inputs (mode structural, the default) or inside the ranges you state (mode bounded), a
concrete input that triggers each (the witness, saved as .pt), and the fix."""

_EPILOG = """\
exit status: 0 no findings, 1 findings, 2 usage error or the script failed before its first backward
(the script's own output goes to stderr: stdout holds the report alone)

examples:
  nanguard audit train.py -- --epochs 1
  nanguard audit --format json -m mypkg.train
  nanguard audit --mode bounded --range data=0,1 --range params=-3,3 train.py
  nanguard audit --emit-tests tests/nan train.py"""


class _AuditParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"nanguard audit: error: {message}\n")
        raise SystemExit(2)


def _range(text: str) -> Tuple[str, Tuple[float, float]]:
    name, sep, bounds = text.partition("=")
    parts = bounds.split(",")
    if not sep or not name or len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected NAME=LO,HI (e.g. data=0,1), got {text!r}")
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bounds must be numbers, got {bounds!r}") from None
    if not lo <= hi:
        raise argparse.ArgumentTypeError(f"LO must be <= HI, got {bounds!r}")
    return name, (lo, hi)


def register(subparsers: argparse._SubParsersAction) -> None:
    previous = subparsers._parser_class
    subparsers._parser_class = _AuditParser
    try:
        p = subparsers.add_parser("audit", help="find the ops that can produce NaN/Inf before a run",
                                  description=_DESCRIPTION, epilog=_EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    finally:
        subparsers._parser_class = previous
    p.add_argument("--mode", choices=("structural", "bounded"), default="structural",
                   help="structural: any finite weights and data (default); bounded: the --range values")
    p.add_argument("--range", dest="ranges", type=_range, action="append", default=[], metavar="NAME=LO,HI",
                   help="bounds for parameters, modules, arguments, 'params' or 'data' (implies --mode bounded)")
    p.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text")
    p.add_argument("--output", "-o", metavar="PATH", help="write the report here instead of stdout")
    p.add_argument("--witness-dir", metavar="DIR", default=".nanguard/witnesses",
                   help="where witness inputs are saved (default: .nanguard/witnesses)")
    p.add_argument("--no-witness", action="store_true", help="skip the search for failing inputs")
    p.add_argument("--witness-budget", type=float, default=3.0, metavar="SECONDS",
                   help="search time per finding (default 3)")
    p.add_argument("--emit-tests", metavar="DIR", help="write one pytest file per finding that replays its witness")
    p.add_argument("--limit", type=int, default=200_000, help="stop tracing after this many ops (default 200000)")
    p.add_argument("-m", dest="module", metavar="MODULE", help="audit a module as python -m runs it")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="script.py [-- args ...]",
                   help="the script and its arguments")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    if args.module:
        target, rest, module = args.module, program, True
    elif program:
        target, rest, module = program[0], program[1:], False
    else:
        return _usage("missing the script to audit, e.g. nanguard audit train.py (or -m package.module)")
    if rest and rest[0] == "--":
        rest = rest[1:]
    ranges: Dict[str, Tuple[float, float]] = dict(args.ranges)
    mode = "bounded" if ranges else args.mode
    if args.witness_budget < 0:
        return _usage("--witness-budget must be >= 0")
    try:
        from nanguard.torch.auditor import audit_script
    except ImportError as err:
        return _usage(str(err))
    from nanguard.core.audit_result import write

    if not module:
        import os
        if not os.path.isfile(target):
            return _usage(f"can't open file {target!r}: no such file")
    else:
        import importlib.util
        import os
        sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(target) is not None
        except (ImportError, ValueError):
            found = False
        finally:
            sys.path.pop(0)
        if not found:
            return _usage(f"no module named {target!r}")
    import contextlib
    # the script's own prints go to stderr, so that stdout holds the report alone (json, sarif)
    with contextlib.redirect_stdout(sys.stderr):
        result = audit_script(target, rest, mode=mode, ranges=ranges or None, witness=not args.no_witness,
                              witness_dir=args.witness_dir, emit_tests=args.emit_tests,
                              witness_budget=args.witness_budget, module=module, limit=args.limit)
    out: Any = sys.stdout
    handle: Optional[Any] = None
    if args.output:
        handle = open(args.output, "w", encoding="utf-8")
        out = handle
    try:
        write(result, args.format, out)
    finally:
        if handle is not None:
            handle.close()
    if result.script_error is not None and result.stopped_at == "error":
        sys.stderr.write(f"nanguard audit: the script failed before its first backward:\n{result.script_error}\n")
        return 2
    return 1 if result.findings else 0


def _usage(message: str) -> int:
    sys.stderr.write(f"nanguard audit: error: {message}\n")
    return 2


def run(argv: Sequence[str]) -> int:  # for tests: parse and run without the top-level parser
    from nanguard.cli import main as cli_main
    return cli_main(["audit", *argv])


__all__ = ["main", "register"]
