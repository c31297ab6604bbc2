"""`nanguard lint`: find NaN/Inf anti-patterns in PyTorch, TensorFlow, Keras, JAX and NumPy source.

Conventions follow ruff/flake8: ``path:line:col: CODE message``, ``--select/--ignore`` with
code prefixes, ``# noqa: CODE``, ``[tool.nanguard.lint]`` in pyproject.toml, ``--fix`` /
``--diff``. Exit status: 0 clean, 1 findings remain, 2 usage error or unreadable input.

This module is imported by `nanguard --help`, so it imports nothing heavy at module level;
the linter itself never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories to lint (default: .); '-' reads stdin")
    sel = parser.add_argument_group("rule selection")
    sel.add_argument("--select", metavar="CODES",
                     help="comma-separated codes, prefixes (NG1) or rule names to enable (default: all)")
    sel.add_argument("--extend-select", metavar="CODES", help="enable these in addition to the selection")
    sel.add_argument("--ignore", metavar="CODES", help="codes or prefixes to disable (wins over --select)")
    sel.add_argument("--confidence", choices=("certain", "all"), default="certain",
                     help="'certain' (default): findings that are NaN/Inf for some input the code accepts; "
                          "'all': also those that may be, depending on data (a code named in --select "
                          "reports both)")
    files = parser.add_argument_group("file selection")
    files.add_argument("--exclude", metavar="PATTERNS",
                       help="comma-separated gitignore-style patterns replacing the default excludes")
    files.add_argument("--extend-exclude", metavar="PATTERNS", help="patterns to exclude in addition")
    files.add_argument("--no-respect-gitignore", action="store_true", help="do not read .gitignore files")
    files.add_argument("--stdin-filename", metavar="NAME", help="name to report for '-' (stdin)")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (as pre-commit needs)")
    out = parser.add_argument_group("output")
    out.add_argument("--output-format", "--format", dest="format", default="text",
                     choices=("text", "json", "github", "sarif", "junit"),
                     help="text (default), json (ruff's), github (workflow annotations), sarif (code scanning), "
                          "junit")
    out.add_argument("--statistics", action="store_true", help="show counts per rule instead of findings")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary line")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings remain")
    fix = parser.add_argument_group("fixing")
    fix.add_argument("--fix", action="store_true",
                     help="apply the semantics-preserving fixes in place and report what changed")
    fix.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="explain a rule (code or name) and exit")
    info.add_argument("--list-rules", action="store_true", help="list all rules and exit")
    conf = parser.add_argument_group("configuration")
    conf.add_argument("--config", metavar="PYPROJECT", help="read [tool.nanguard.lint] from this file")
    conf.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    conf.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                      help="worker processes (default: the number of usable cores)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lint", help="find NaN/Inf anti-patterns in source code (no code is run)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def _error(message: str) -> None:
    print(f"nanguard lint: error: {message}", file=sys.stderr)


class _PipeOut:
    """stdout for ``nanguard lint ... | head``: once the reader has gone, the rest of the output
    is dropped instead of ending in a BrokenPipeError traceback, and the run still ends with
    its own status (1 if there were findings), as if it had been read to the end."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def write_bytes(self, data: bytes) -> None:
        """``--fix -``: the fixed source, written to the binary stream."""
        if not self.broken:
            try:
                self.stream.buffer.write(data)
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.broken = True
        # Python flushes stdout once more at exit, with what is still buffered: point the
        # descriptor at devnull so that flush succeeds quietly (the recipe of Python's docs).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a real file (a test's StringIO)
            pass


def run(args: argparse.Namespace, stdout=None) -> int:
    """Run the lint command for parsed arguments; returns the exit status."""
    if stdout is not None:
        return _run(args, stdout, None)
    pipe = _PipeOut(sys.stdout)
    try:
        return _run(args, pipe, pipe)
    finally:
        pipe.flush()


def _run(args: argparse.Namespace, stdout, pipe: _PipeOut | None) -> int:
    from nanguard.lint import formats, output
    from nanguard.lint.config import (
        ConfigError,
        load_settings,
        split_codes,
        validate_selectors,
    )
    from nanguard.lint.discovery import Discovery
    from nanguard.lint.rules import BY_NAME, RULES
    from nanguard.lint.runner import Task, default_jobs, run_tasks

    out = stdout
    if args.fix and "-" in (args.paths or []):
        # `--fix -` is a filter: stdout carries the fixed code alone, every message goes to stderr.
        out = sys.stderr
    if args.list_rules:
        out.write(output.rule_table())
        return EXIT_CLEAN
    if args.explain:
        key = args.explain.strip()
        rule = RULES.get(key.upper()) or BY_NAME.get(key)
        if rule is None:
            _error(f"unknown rule {args.explain!r}; see `nanguard lint --list-rules`")
            return EXIT_ERROR
        out.write(output.explain(rule))
        return EXIT_CLEAN
    if args.fix and args.diff:
        _error("--fix and --diff cannot be combined (--diff shows the fix without writing)")
        return EXIT_ERROR
    if args.jobs < 0:
        _error("--jobs must be >= 0")
        return EXIT_ERROR

    try:
        settings = load_settings(Path(args.config) if args.config else None, isolated=args.isolated)
        for option in ("select", "extend_select", "ignore"):
            values = split_codes(getattr(args, option))
            validate_selectors(values, "--" + option.replace("_", "-"))
            if getattr(args, option) is not None:
                if option == "select":
                    settings.select = values
                else:
                    getattr(settings, option).extend(values)
        if args.exclude is not None:
            settings.exclude = split_codes(args.exclude)
        if args.extend_exclude:
            settings.extend_exclude += split_codes(args.extend_exclude)
        if args.no_respect_gitignore:
            settings.respect_gitignore = False
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_ERROR

    from nanguard.lint.config import enabled_codes, relative_to_root

    status = EXIT_CLEAN
    paths: list[str] = args.paths or ["."]
    discovery = Discovery(settings.exclude + settings.extend_exclude, settings.root, settings.respect_gitignore,
                          force_exclude=args.force_exclude)
    files: list[Path] = []
    seen = set()
    stdin_used = False
    for p in paths:
        if p == "-":
            stdin_used = True
            continue
        try:
            found = discovery.files([Path(p)])
        except FileNotFoundError:
            _error(f"{p}: no such file or directory")
            status = EXIT_ERROR
            continue
        for f in found:  # `nanguard lint a.py .` lints a.py once
            key = os.path.abspath(f)
            if key not in seen:
                seen.add(key)
                files.append(f)

    base_enabled = settings.enabled()
    possible = None if args.confidence == "all" else _named_codes(
        split_codes(args.select) + split_codes(args.extend_select))
    pfi = _compile_pfi(settings.per_file_ignores)
    mode = "fix" if args.fix else "diff" if args.diff else "check"
    tasks: list[Task] = []
    cwd = Path.cwd()
    for f in files:
        display = _display(f, cwd)
        enabled = base_enabled
        rel = relative_to_root(f, settings.root)
        for pattern, codes in pfi:
            if pattern.regex.match(rel):
                enabled = enabled - enabled_codes(codes, [])
        tasks.append(Task(str(f), display, frozenset(enabled), mode, possible))
    if stdin_used:
        tasks.append(Task("-", args.stdin_filename or "-", base_enabled, mode, possible))

    if not tasks and status == EXIT_CLEAN:
        print("warning: No Python files found under the given path(s)", file=sys.stderr)
    results = run_tasks(tasks, args.jobs or default_jobs())

    findings = []
    fixed_total = 0
    changed = 0
    for r in results:
        if r.error:
            _error(r.error)
            status = EXIT_ERROR
        if r.crash:
            _error(r.crash)
            status = EXIT_ERROR
        findings.extend(r.findings)
        if r.fixed is not None and r.original is not None:
            fixed_total += r.fixes_applied
            changed += 1
            if args.diff:
                out.write(output.unified_diff(r.display, r.original.decode("utf-8", "replace"),
                                              r.fixed.decode("utf-8", "replace")))
            elif r.path == "-":
                continue  # written below, fixed or not
            else:
                try:
                    with open(r.path, "wb") as fh:
                        fh.write(r.fixed)
                except OSError as exc:
                    _error(f"{r.display}: cannot write: {exc.strerror or exc}")
                    status = EXIT_ERROR
    for r in results:
        if r.path == "-" and args.fix:
            data = r.fixed if r.fixed is not None else r.source
            if data is not None:
                if pipe is not None:
                    pipe.write_bytes(data)
                else:
                    sys.stdout.buffer.write(data)
                    sys.stdout.flush()
    findings.sort(key=lambda f: f.sort_key())

    if args.diff:
        if not args.quiet:
            print(f"Would fix {output.plural(fixed_total, 'finding')} in {output.plural(changed, 'file')}.",
                  file=sys.stderr)
        return status if status == EXIT_ERROR else (EXIT_FINDINGS if changed else EXIT_CLEAN)

    if args.statistics:
        (formats.write_statistics_json if args.format == "json" else output.write_statistics)(findings, out)
    elif args.format == "json":
        output.write_json(findings, out)
    elif args.format in ("github", "sarif", "junit"):
        getattr(formats, f"write_{args.format}")(findings, out)
    elif not tasks and status == EXIT_CLEAN:
        pass  # nothing was linted: the warning above said so, "All checks passed!" would not be true
    else:
        if args.fix and not args.quiet:
            # What --fix changed, one line per rewrite (not in the `path:line:col: CODE` form,
            # so tools that parse findings do not mistake them for remaining ones).
            for r in results:
                for f in r.fixed_findings:
                    out.write(f"fixed {f.path}:{f.line}:{f.col}: {f.code} {f.fix.description}\n")  # type: ignore
        output.write_text(findings, out, show_fixable=not args.fix)
        if not args.quiet:
            fixable = sum(1 for f in findings if f.fix is not None)
            if args.fix:
                if findings or fixed_total:
                    out.write(f"Found {output.plural(len(findings) + fixed_total, 'finding')} "
                              f"({fixed_total} fixed, {len(findings)} remaining).\n")
                else:
                    out.write("All checks passed!\n")
            elif findings:
                tail = f"\n[*] {fixable} fixable with the `--fix` option." if fixable else ""
                out.write(f"Found {output.plural(len(findings), 'finding')}.{tail}\n")
            elif status == EXIT_CLEAN:
                out.write("All checks passed!\n")
    if status == EXIT_ERROR:
        return EXIT_ERROR
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _named_codes(selectors: list[str]) -> frozenset[str]:
    """The codes named exactly (`NG401`, `division-by-count`) among selectors: asking for a rule by
    name asks for all of its findings, those that depend on data too; a prefix (`NG4`) does not."""
    from nanguard.lint.rules import BY_NAME, RULES

    named = set()
    for s in selectors:
        if s.upper() in RULES:
            named.add(s.upper())
        elif s in BY_NAME:
            named.add(BY_NAME[s].code)
    return frozenset(named)


def _compile_pfi(per_file_ignores):
    from nanguard.lint.discovery import compile_pattern
    out = []
    for pattern, codes in per_file_ignores.items():
        compiled = compile_pattern(pattern)
        if compiled is not None:
            out.append((compiled, codes))
    return out


def _display(path: Path, cwd: Path) -> str:
    """Paths as given when relative; absolute paths under the cwd are shown relative to it."""
    if not path.is_absolute():
        return os.path.normpath(str(path))
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nanguard lint", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for `python -m nanguard.lint`."""
    args = build_parser().parse_args(argv)
    return run(args)
