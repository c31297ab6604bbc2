"""nanguard lint against ruff on the same trees, in the same run: CPU time, ratio, findings.

    .venv/bin/python benchmarks/lint.py                     # torch, tensorflow, keras, jax packages
    .venv/bin/python benchmarks/lint.py PATH [PATH...]      # other trees
    .venv/bin/python benchmarks/lint.py --list torch        # ... and print the default-set findings

For each tree, rounds alternate `nanguard lint` and `ruff check --select E,F` (both on every
usable core, no cache, no configuration) and take the CPU time (user + system of the child
processes) of each; the ratio is the median over rounds of nanguard/ruff, so this shared
machine's drifting speed cancels out. Also reported: files, lines, lines per CPU-second, the
default-set (CERTAIN) and all findings per rule, and crashes (which must be 0).

Goal (issue 12): the installed torch tree in under 10 s of CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
DEFAULT_TREES = ["torch", "tensorflow", "keras", "jax"]


def _ruff() -> str:
    for candidate in (Path(sys.executable).with_name("ruff"), shutil.which("ruff")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    raise SystemExit("ruff is not installed next to this Python or on PATH")


def _cpu(cmd: list[str]) -> tuple[float, float, str, int]:
    """(CPU seconds of the child and its workers, wall seconds, stdout, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return cpu, wall, proc.stdout, proc.returncode


def _counts(stdout: str) -> dict[str, int]:
    return {row["code"]: row["count"] for row in json.loads(stdout or "[]")}


def _lines(tree: Path) -> tuple[int, int]:
    files = lines = 0
    for path in tree.rglob("*.py"):
        files += 1
        with open(path, "rb") as fh:
            lines += fh.read().count(b"\n")
    return files, lines


def bench(tree: Path, rounds: int, list_findings: bool) -> dict:
    lint = [sys.executable, "-m", "nanguard", "lint", "--isolated", "--no-respect-gitignore", "--exclude", "",
            "--statistics", "--output-format", "json", str(tree)]
    ruff = [_ruff(), "check", "--isolated", "--no-cache", "--select", "E,F", "--exit-zero", "--quiet", str(tree)]
    nanguard_cpu, ruff_cpu, walls = [], [], []
    for r in range(rounds):
        order = [("n", lint), ("r", ruff)] if r % 2 == 0 else [("r", ruff), ("n", lint)]
        for which, cmd in order:
            cpu, wall, out, _ = _cpu(cmd)
            if which == "n":
                nanguard_cpu.append(cpu)
                walls.append(wall)
                certain = _counts(out)
            else:
                ruff_cpu.append(cpu)
    _, _, out_all, _ = _cpu(lint[:-1] + ["--confidence", "all", str(tree)])
    files, lines = _lines(tree)
    if list_findings:
        _, _, text, _ = _cpu([sys.executable, "-m", "nanguard", "lint", "--isolated", "--no-respect-gitignore",
                              "--exclude", "", "-q", "--exit-zero", str(tree)])
        print(text)
    ratios = [n / r for n, r in zip(nanguard_cpu, ruff_cpu)]
    return {"tree": str(tree), "files": files, "lines": lines, "nanguard_cpu_s": min(nanguard_cpu),
            "ruff_cpu_s": min(ruff_cpu), "ratio": statistics.median(ratios), "wall_s": min(walls),
            "certain": certain, "all": _counts(out_all)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", help="paths, or names of installed packages (default: "
                                                 + ", ".join(DEFAULT_TREES) + ")")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per tree (default 3)")
    parser.add_argument("--list", action="store_true", help="print the default-set findings of each tree")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = []
    for name in args.trees or DEFAULT_TREES:
        tree = Path(name) if Path(name).exists() else SITE / name
        if not tree.exists():
            print(f"skip {name}: not found", file=sys.stderr)
            continue
        results.append(bench(tree, max(1, args.rounds), args.list))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'tree':<12} {'files':>6} {'lines':>9} {'nanguard CPU s':>15} {'ruff E,F CPU s':>15} {'ratio':>6} "
          f"{'lines/CPU-s':>12}  default-set findings (all)")
    for r in results:
        certain = sum(r["certain"].values())
        everything = sum(r["all"].values())
        print(f"{Path(r['tree']).name:<12} {r['files']:>6} {r['lines']:>9} {r['nanguard_cpu_s']:>15.2f} "
              f"{r['ruff_cpu_s']:>15.2f} {r['ratio']:>6.2f} {r['lines'] / r['nanguard_cpu_s']:>12.0f}  "
              f"{certain} ({everything})  " + " ".join(f"{c}:{n}" for c, n in sorted(r["certain"].items())))
    torch_rows = [r for r in results if Path(r["tree"]).name == "torch"]
    if torch_rows:
        ok = torch_rows[0]["nanguard_cpu_s"] < 10
        print("goal: torch tree < 10 s CPU: " + ("met" if ok else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
