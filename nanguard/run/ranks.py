"""``nanguard run`` on every rank of a torchrun job: one JSON report per rank, and a merged one.

Under ``torchrun --nproc_per_node N -m nanguard run --json-dir DIR train.py`` each rank runs
the program under detection and writes ``DIR/rank<R>.json``; rank 0 then waits for the other
ranks' files and writes ``DIR/merged.json``, which says which rank went non-finite first (by
step, then phase) and what every other rank saw. A rank whose values went non-finite only
because a collective brought them (its report has ``received_through``, e.g. ``all_reduce``)
is not a second origin. The other ranks wait for the merged file before they exit, so that
torchrun, which stops a job when one rank exits with an error, does not stop rank 0 first.

Framework-free: the rank and world size come from torchrun's environment (``RANK``,
``WORLD_SIZE``), the merge works on the JSON dicts.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

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


def _where(p: Dict[str, Any]) -> str:
    if p.get("file") and p.get("line"):
        return f"{os.path.basename(p['file'])}:{p['line']}"
    if p.get("call_file") and p.get("call_line"):
        return f"{os.path.basename(p['call_file'])}:{p['call_line']} (backward() call)"
    return "an unknown line"


def _when(p: Dict[str, Any]) -> str:
    step = f"step {p['step']}, " if p.get("step") is not None else ""
    return f"{step}{p.get('phase')}"


def _order(p: Dict[str, Any]) -> Tuple[int, int, int]:
    return (p.get("step") or 0, _PHASES.get(p.get("phase") or "", 9), p.get("rank", 0))


def _entry(p: Dict[str, Any], status: str) -> Dict[str, Any]:
    keys = ("rank", "step", "phase", "kind", "op", "torch_function", "file", "line", "code", "module",
            "received_through", "global_index", "message")
    out = {"rank": p.get("rank"), "status": status, **{k: p.get(k) for k in keys[1:] if p.get(k) is not None}}
    if p.get("status") not in (None, "found"):
        out["run"] = p.get("status")
    return out


def merge(payloads: Sequence[Dict[str, Any]], world: int) -> Dict[str, Any]:
    """Which rank went non-finite first, and what each rank saw.

    A report of values received through a collective is never an origin. Among the ranks that
    located where they made a value, the earliest step comes first, then phase (input, forward,
    backward, optimizer), then the lowest rank. When none located one, the first rank is the
    only one that did not receive its values, if every other reporting rank did; otherwise
    ``first_rank`` is None (several ranks saw values they could not place, by paths not checked).
    """
    found = [p for p in payloads if p.get("found") and not p.get("missing")]
    made = [p for p in found if not p.get("received_through")]
    located = [p for p in made if p.get("line") is not None]
    # not located, but the only rank that did not receive it (FSDP2 backward, default mode)
    first = min(located, key=_order) if located else (made[0] if len(made) == 1 and len(found) > 1 else None)
    ranks: List[Dict[str, Any]] = []
    for p in sorted(payloads, key=lambda q: q.get("rank", 0)):
        if p.get("missing"):
            ranks.append({"rank": p.get("rank"), "status": "missing",
                          "note": "no report from this rank (it crashed, was stopped, or was still running)"})
        elif not p.get("found"):
            ranks.append({"rank": p.get("rank"), "status": "clean" if p.get("status") == "clean" else p.get("status"),
                          "message": p.get("message")})
        elif p is first:
            ranks.append(_entry(p, "first" if p.get("line") is not None else "first (not located)"))
        elif p.get("received_through"):
            ranks.append(_entry(p, "received"))
        elif p.get("line") is None:
            ranks.append(_entry(p, "not located"))
        else:
            ranks.append(_entry(p, "also made"))
    return {"found": bool(found), "world_size": world, "first_rank": first.get("rank") if first else None,
            "first": _entry(first, "first") if first else None, "ranks": ranks,
            "message": _message(first, ranks, world)}


def _message(first: Optional[Dict[str, Any]], ranks: List[Dict[str, Any]], world: int) -> str:
    missing = [str(r["rank"]) for r in ranks if r["status"] == "missing"]
    if first is None:
        seen = [r for r in ranks if r["status"] in ("received", "not located")]
        if not seen:
            text = f"no rank of {world} reported a NaN or Inf"
            return text + (f" (no report from rank(s) {', '.join(missing)})" if missing else "")
        return ("no rank located where the non-finite values were made: " +
                "; ".join(f"rank {r['rank']} " + (f"received them through {r['received_through']}"
                                                  if r["status"] == "received" else "could not locate them") +
                          f" ({_when(r)})" for r in seen) +
                " (nanguard run --exhaustive checks every op, in the backward pass too)")
    kind = "NaN" if first.get("kind") == "nan" else "Inf"
    what = first.get("torch_function") or first.get("op") or "?"
    if first.get("line") is None:
        parts = [f"rank {first['rank']} went non-finite first ({_when(first)}): it made the {kind} it sent to the "
                 f"others (the op was not located; nanguard run --exhaustive names it)"]
    else:
        parts = [f"rank {first['rank']} went non-finite first ({_when(first)}): {kind} from {what} at "
                 f"{_where(first)}"]
    for r in ranks:
        if r["rank"] == first["rank"]:
            continue
        if r["status"] == "received":
            parts.append(f"rank {r['rank']} received it through {r['received_through']} at {_where(r)} ({_when(r)})")
        elif r["status"] == "also made":
            parts.append(f"rank {r['rank']} also made a non-finite value later ({_when(r)}) at {_where(r)}")
        elif r["status"] == "not located":
            parts.append(f"rank {r['rank']} saw non-finite values ({_when(r)}) that it could not locate")
        elif r["status"] == "missing":
            parts.append(f"rank {r['rank']} wrote no report")
        else:
            parts.append(f"rank {r['rank']} saw none")
    return "; ".join(parts)


__all__ = ["MERGED", "collect", "from_env", "merge", "rank_file", "wait_for_merged", "write_rank"]
