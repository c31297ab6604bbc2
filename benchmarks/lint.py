"""Lint the installed torch package source: speed, findings and crashes.

    .venv/bin/python benchmarks/lint.py                 # the whole torch tree, all cores
    .venv/bin/python benchmarks/lint.py --list          # ... and print every finding
    .venv/bin/python benchmarks/lint.py --jobs 1 PATH   # another tree, one core

Reports files, lines, wall seconds, files/s, lines/s, findings per rule, syntax errors
(NG001: files this Python cannot parse) and crashes (exceptions inside the linter, which
must be 0). Also reports the baseline cost of `ast.parse` alone over the same files on
the same cores (measured in the same run, since this shared machine's speed drifts), so the
linter's own overhead is visible, and the CLI start-up time.

Goal (issue 5): 0 crashes and < 30 s for the ~2,300-file torch tree on 2 cores.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nanguard.lint.checker import ALL_CODES  # noqa: E402
from nanguard.lint.config import DEFAULT_EXCLUDE  # noqa: E402
from nanguard.lint.discovery import Discovery  # noqa: E402
from nanguard.lint.runner import Task, _tune_gc, default_jobs, run_tasks  # noqa: E402


def torch_source_dir() -> Path:
    """The torch package directory, located without importing torch."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0])


def _parse_only(path: str) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(Path(path).read_bytes())
        except (SyntaxError, ValueError):
            pass
    return 0


def parse_baseline(files, jobs: int) -> float:
    start = time.perf_counter()
    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else multiprocessing
    order = sorted(files, key=lambda p: -os.path.getsize(p))
    with ctx.Pool(jobs, initializer=_tune_gc) as pool:  # same GC settings as the linter's workers
        pool.map(_parse_only, [str(p) for p in order], chunksize=1)
    return time.perf_counter() - start


def startup_seconds(args) -> float:
    """Wall time of `python -m nanguard lint --list-rules` (interpreter + package import)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nanguard", "lint", "--list-rules"], cwd=REPO,
                       stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", help="tree to lint (default: the installed torch package)")
    parser.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (default: usable cores)")
    parser.add_argument("--list", action="store_true", help="print every finding")
    parser.add_argument("--no-baseline", action="store_true", help="skip the ast.parse-only baseline")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved lint/parse rounds (default 2)")
    args = parser.parse_args()

    root = Path(args.path) if args.path else torch_source_dir()
    jobs = args.jobs or default_jobs()
    files = Discovery(list(DEFAULT_EXCLUDE), root, respect_gitignore=False).files([root])
    tasks = [Task(str(f), str(f.relative_to(root.parent)), ALL_CODES) for f in files]

    # Interleaved rounds (lint, parse, lint, parse, ...): this shared machine's speed drifts,
    # so the linter is compared with the parse-only baseline of the same round, and the
    # reported time is the best round.
    walls, bases = [], []
    for _ in range(max(1, args.rounds)):
        start = time.perf_counter()
        results = run_tasks(tasks, jobs)
        walls.append(time.perf_counter() - start)
        if not args.no_baseline:
            bases.append(parse_baseline(files, jobs))
    wall = min(walls)

    lines = sum(r.lines for r in results)
    findings = [f for r in results for f in r.findings]
    crashes = [r.crash for r in results if r.crash]
    errors = [r.error for r in results if r.error]
    per_code = Counter(f.code for f in findings)
    syntax = per_code.pop("NG001", 0)

    if args.list:
        for f in sorted(findings, key=lambda f: f.sort_key()):
            print(f.format())
        print()
    print(f"tree        {root}")
    print(f"cores       {jobs}")
    print(f"files       {len(files)}")
    print(f"lines       {lines}")
    print(f"seconds     {wall:.2f}")
    print(f"files/s     {len(files) / wall:.0f}")
    print(f"lines/s     {lines / wall:.0f}")
    print(f"findings    {sum(per_code.values())}  " + "  ".join(f"{c}:{n}" for c, n in sorted(per_code.items())))
    print(f"syntax err  {syntax}  (NG001: not parseable by Python {sys.version_info.major}.{sys.version_info.minor})")
    print(f"crashes     {len(crashes)}")
    print(f"unreadable  {len(errors)}")
    for c in crashes[:10]:
        print("  crash:", c)
    if bases:
        ratio = statistics.median(w / b for w, b in zip(walls, bases))
        print(f"rounds      {', '.join(f'{w:.2f}' for w in walls)} s (best is reported)")
        print(f"ast.parse   {min(bases):.2f} s alone on {jobs} cores; linter / parse = {ratio:.2f} "
              "(median over rounds)")
        print(f"start-up    {startup_seconds(args):.2f} s for `python -m nanguard lint --list-rules`")
    ok = not crashes and wall < 30
    print("goal        " + ("met" if ok else "NOT met") + " (0 crashes, < 30 s)")
    return 0 if not crashes else 1


if __name__ == "__main__":
    sys.exit(main())
