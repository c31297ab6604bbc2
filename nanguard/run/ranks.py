"""``nanguard run`` on every rank of a torchrun job: one JSON report per rank, and a merged one.

Under ``torchrun --nproc_per_node N -m nanguard run --json-dir DIR train.py`` each rank runs
the program under detection and writes ``DIR/rank<R>.json``; rank 0 then waits for the other
ranks' files and writes ``DIR/merged.json``, which says which rank went non-finite first (by
step, then phase) and what every other rank saw. A rank whose values went non-finite only
because a collective brought them (its report has ``received_through``, e.g. ``all_reduce``)
is not a second origin. The other ranks wait for the merged file before they exit, so that
torchrun, which stops a job when one rank exits with an error, does not stop rank 0 first.

Framework-free: the rank and world size come from torchrun's environment (``RANK``,
``WORLD_SIZE``); the merge reads each rank's finding back as a `Report` (`Report.from_dict`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from nanguard.core.report import Report

MERGED = "merged.json"
_PHASES = {"input": 0, "forward": 1, "backward": 2, "optimizer": 3}


def from_env() -> Optional[Tuple[int, int]]:
    """(rank, world size) of a multi-process torchrun job; None for a single process."""
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if not (rank.isdigit() and world.isdigit()) or int(world) < 2:
        return None
    return int(rank), int(world)


def rank_file(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.json")


def _write(path: str, payload: Dict[str, Any]) -> None:
    """Write whole or not at all: readers poll for the file, so it appears complete (a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)


def write_rank(directory: str, rank: int, world: int, payload: Dict[str, Any]) -> str:
    os.makedirs(directory, exist_ok=True)
    path = rank_file(directory, rank)
    _write(path, {**payload, "rank": rank, "world_size": world})
    return path


def _wait_for(paths: Sequence[str], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not all(os.path.exists(p) for p in paths):
        time.sleep(0.05)


def _read(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def collect(directory: str, world: int, timeout_s: float) -> Dict[str, Any]:
    """Rank 0: wait (at most ``timeout_s``) for every rank's file, merge them, write merged.json."""
    paths = [rank_file(directory, r) for r in range(world)]
    _wait_for(paths, timeout_s)
    payloads = [_read(p) for p in paths]
    merged = merge([p if p is not None else {"rank": r, "missing": True} for r, p in enumerate(payloads)], world)
    _write(os.path.join(directory, MERGED), merged)
    return merged


def wait_for_merged(directory: str, timeout_s: float) -> None:
    """A rank other than 0: let rank 0 finish the merge before this process exits."""
    _wait_for([os.path.join(directory, MERGED)], timeout_s)


@dataclass(frozen=True)
class _Finding:
    """A rank that found a non-finite value: its file, and the report in it read back (None when
    nanguard raised outside the detectors, a GradGuard with policy "raise": found, no report)."""

    payload: Dict[str, Any]
    report: Optional[Report]

    @property
    def rank(self) -> int:
        return int(self.payload.get("rank", 0))

    @property
    def received_through(self) -> Optional[str]:
        return self.report.received_through if self.report is not None else None

    @property
    def line(self) -> Optional[int]:
        return self.report.line if self.report is not None else None


def _finding(p: Dict[str, Any]) -> Optional[_Finding]:
    if not p.get("found") or p.get("missing"):
        return None
    return _Finding(p, Report.from_dict(p) if p.get("kind") is not None else None)


def _where(file: Optional[str], line: Optional[int], call_file: Optional[str] = None,
           call_line: Optional[int] = None) -> str:
    if file and line:
        return f"{os.path.basename(file)}:{line}"
    if call_file and call_line:
        return f"{os.path.basename(call_file)}:{call_line} (backward() call)"
    return "an unknown line"


def _when(r: Dict[str, Any]) -> str:
    step = f"step {r['step']}, " if r.get("step") is not None else ""
    return f"{step}{r.get('phase')}"


def _order(f: _Finding) -> Tuple[int, int, int]:
    r = f.report
    return ((r.step if r is not None else None) or 0, _PHASES.get(r.phase if r is not None else "", 9), f.rank)


_ENTRY_KEYS = ("step", "phase", "kind", "op", "torch_function", "api", "file", "line", "code", "module",
               "received_through", "global_index", "message")


def _entry(f: _Finding, status: str) -> Dict[str, Any]:
    """A finding rank's line in the merged report: what its report says, where it is known."""
    values = {k: getattr(f.report, k) if f.report is not None else f.payload.get(k) for k in _ENTRY_KEYS}
    if values["global_index"] is not None:
        values["global_index"] = list(values["global_index"])
    out = {"rank": f.payload.get("rank"), "status": status, **{k: v for k, v in values.items() if v is not None}}
    if f.payload.get("status") not in (None, "found"):
        out["run"] = f.payload.get("status")
    return out


def merge(payloads: Sequence[Dict[str, Any]], world: int) -> Dict[str, Any]:
    """Which rank went non-finite first, and what each rank saw.

    A report of values received through a collective is never an origin. Among the ranks that
    located where they made a value, the earliest step comes first, then phase (input, forward,
    backward, optimizer), then the lowest rank. When none located one, the first rank is the
    only one that did not receive its values, if every other reporting rank did; otherwise
    ``first_rank`` is None (several ranks saw values they could not place, by paths not checked).
    """
    read = [(p, _finding(p)) for p in sorted(payloads, key=lambda q: q.get("rank", 0))]
    found = [f for _, f in read if f is not None]
    made = [f for f in found if not f.received_through]
    located = [f for f in made if f.line is not None]
    # not located, but the only rank that did not receive it (FSDP2 backward, default mode)
    first = min(located, key=_order) if located else (made[0] if len(made) == 1 and len(found) > 1 else None)
    ranks: List[Dict[str, Any]] = []
    for p, f in read:
        if p.get("missing"):
            ranks.append({"rank": p.get("rank"), "status": "missing",
                          "note": "no report from this rank (it crashed, was stopped, or was still running)"})
        elif f is None:
            ranks.append({"rank": p.get("rank"), "status": "clean" if p.get("status") == "clean" else p.get("status"),
                          "message": p.get("message")})
        elif first is not None and p is first.payload:
            ranks.append(_entry(f, "first" if f.line is not None else "first (not located)"))
        elif f.received_through:
            ranks.append(_entry(f, "received"))
        elif f.line is None:
            ranks.append(_entry(f, "not located"))
        else:
            ranks.append(_entry(f, "also made"))
    return {"found": bool(found), "world_size": world, "first_rank": first.rank if first else None,
            "first": _entry(first, "first") if first else None, "ranks": ranks,
            "message": _message(first, ranks, world)}


def _message(finding: Optional[_Finding], ranks: List[Dict[str, Any]], world: int) -> str:
    missing = [str(r["rank"]) for r in ranks if r["status"] == "missing"]
    if finding is None:
        seen = [r for r in ranks if r["status"] in ("received", "not located")]
        if not seen:
            text = f"no rank of {world} reported a NaN or Inf"
            return text + (f" (no report from rank(s) {', '.join(missing)})" if missing else "")
        return ("no rank located where the non-finite values were made: " +
                "; ".join(f"rank {r['rank']} " + (f"received them through {r['received_through']}"
                                                  if r["status"] == "received" else "could not locate them") +
                          f" ({_when(r)})" for r in seen) +
                " (nanguard run --exhaustive checks every op, in the backward pass too)")
    first = _entry(finding, "first")
    kind = "NaN" if first.get("kind") == "nan" else "Inf"
    what = first.get("api") or first.get("op") or "?"
    at = finding.report
    if at is None or at.line is None:
        parts = [f"rank {first['rank']} went non-finite first ({_when(first)}): it made the {kind} it sent to the "
                 f"others (the op was not located; nanguard run --exhaustive names it)"]
    else:
        parts = [f"rank {first['rank']} went non-finite first ({_when(first)}): {kind} from {what} at "
                 f"{_where(at.file, at.line, at.call_file, at.call_line)}"]
    for r in ranks:
        if r["rank"] == first["rank"]:
            continue
        if r["status"] == "received":
            parts.append(f"rank {r['rank']} received it through {r['received_through']} at "
                         f"{_where(r.get('file'), r.get('line'))} ({_when(r)})")
        elif r["status"] == "also made":
            parts.append(f"rank {r['rank']} also made a non-finite value later ({_when(r)}) at "
                         f"{_where(r.get('file'), r.get('line'))}")
        elif r["status"] == "not located":
            parts.append(f"rank {r['rank']} saw non-finite values ({_when(r)}) that it could not locate")
        elif r["status"] == "missing":
            parts.append(f"rank {r['rank']} wrote no report")
        else:
            parts.append(f"rank {r['rank']} saw none")
    return "; ".join(parts)


__all__ = ["MERGED", "collect", "from_env", "merge", "rank_file", "wait_for_merged", "write_rank"]
