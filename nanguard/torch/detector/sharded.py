"""Sharded values and multi-rank runs: DTensor shards, collectives, the rank and the global index.

* A DTensor op is judged on this rank's local shard (its ``_local_tensor``): the same rule as
  for plain tensors (`values.judge`), on the values this rank holds. A non-finite shard is
  reported with the rank and the element's index in the whole (global) tensor.
* Collectives (`collectives.py`): a value that arrives non-finite through one is marked
  ``received_through``, not an origin (`nanguard.run.ranks` merges the ranks' reports), and
  a replay in a multi-rank run stops at the first collective rather than wait for the others.
* The default mode checks only outermost module calls; in a multi-rank run it also checks each
  inner module's output (`nested_call`), so that the unit replayed is the innermost module that
  made the value, which rarely holds a collective (an FSDP2 model's whole forward does).

Everything torch keeps private (``DTensor._local_tensor``, ``compute_local_shape_and_global_offset``)
is read in one place each here, with a clear error when a torch version lacks it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence

import torch

from nanguard.torch._compat import (
    compute_local_shape_and_global_offset, current_autograd_node, functional_collectives, pytree,
)
from nanguard.torch.detector._state import STATE, capture_rng, orig_module_call
from nanguard.torch.detector.collectives import (  # noqa: F401  (the detector's hooks call them from here)
    COLLECTIVE, ROUTES, SKIP, CollectiveReached, collective_name, live_collective, refuse_collective, replay_guard,
    replay_special, route,
)
from nanguard.torch.detector.aten import mutated_args, uses_rng, written_tensors
from nanguard.torch.detector.values import PLAIN_TYPES, all_finite, checkable, fast_finite

if TYPE_CHECKING:
    from nanguard.core.report import Report
    from nanguard.torch.detector.activation import Activation

_Tensor = torch.Tensor
_current_node = current_autograd_node
_dist = torch.distributed if torch.distributed.is_available() else None


# ------------------------------------------------------------------------- ranks and shards
def process_rank() -> Optional[int]:
    """This process's rank: from the process group, else torchrun's ``RANK`` (None outside a
    multi-process run)."""
    if _dist is not None and _dist.is_initialized():
        return _dist.get_rank()
    env = os.environ.get("RANK")
    return int(env) if env and env.isdigit() and _env_world() > 1 else None


def _env_world() -> int:
    env = os.environ.get("WORLD_SIZE", "1")
    return int(env) if env.isdigit() else 1


def multi_rank() -> bool:
    """Whether other ranks run beside this one (then a replay must not run a collective)."""
    if _dist is not None and _dist.is_initialized():
        return _dist.get_world_size() > 1
    return _env_world() > 1


_DTENSOR: List[Any] = []


def dtensor_type() -> Optional[type]:
    """``DTensor``, once the program has imported it (importing it here would cost ~1.5 s)."""
    if _DTENSOR:
        return _DTENSOR[0]
    module = sys.modules.get("torch.distributed.tensor")
    cls = getattr(module, "DTensor", None)
    if cls is not None:
        _DTENSOR.append(cls)
    return cls


def is_dtensor(t: Any) -> bool:
    if type(t) in PLAIN_TYPES or not isinstance(t, _Tensor):
        return False
    cls = dtensor_type()
    return cls is not None and isinstance(t, cls)


def local(t: Any) -> Any:
    """This rank's shard of a DTensor, the waited values of a functional collective's
    ``AsyncCollectiveTensor``, and any other tensor itself."""
    if not is_dtensor(t):
        if type(t) in PLAIN_TYPES or not isinstance(t, _Tensor):
            return t
        funcol = functional_collectives()
        pending = getattr(funcol, "AsyncCollectiveTensor", None)
        if pending is not None and isinstance(t, pending):
            return t.trigger_wait()
        return t
    shard = getattr(t, "_local_tensor", None)   # private: read here only
    if shard is None:
        raise RuntimeError("nanguard: this torch's DTensor has no _local_tensor; nanguard cannot read the "
                           "rank's shard (please report the torch version)")
    return shard


def localize(tree: Any) -> Any:
    """The same structure with every DTensor replaced by its local shard."""
    return pytree.tree_map(lambda x: local(x) if isinstance(x, _Tensor) else x, tree)


def shard_offset(dt: Any) -> tuple:
    """Where this rank's shard of ``dt`` starts in the global tensor (one offset per dim)."""
    _, offset = compute_local_shape_and_global_offset()(dt.shape, dt.device_mesh, dt.placements)
    return tuple(int(o) for o in offset)


def global_index(dt: Any) -> Optional[List[int]]:
    """The global index of the first non-finite element of this rank's shard of ``dt``."""
    shard = local(dt)
    if not checkable(shard) or shard.numel() == 0:
        return None
    with torch.no_grad():
        x = torch.view_as_real(shard) if shard.is_complex() else shard
        bad = (~torch.isfinite(x)).reshape(*shard.shape, -1).any(-1) if shard.is_complex() else ~torch.isfinite(x)
        hits = bad.nonzero()
    if hits.numel() == 0:
        return None
    first = [int(i) for i in hits[0].tolist()]
    offset = shard_offset(dt)
    if len(offset) != len(first):
        return None
    return [i + o for i, o in zip(first, offset)]


class _Pending(threading.local):
    """What the report being built should carry beyond what `make_report` is told."""

    def __init__(self) -> None:
        self.global_index: Optional[List[int]] = None
        self.notes: List[str] = []


PENDING = _Pending()


@contextlib.contextmanager
def _indexed(dt: Any) -> Iterator[None]:
    """While the report of a finding in DTensor ``dt`` is built: its global index, and a note
    that the values shown are this rank's shard."""
    saved = PENDING.global_index, PENDING.notes
    PENDING.global_index = global_index(dt)
    placements = ", ".join(repr(p) for p in getattr(dt, "placements", ()))
    PENDING.notes = [f"the tensors shown are this rank's shards of DTensors; the output's global shape is "
                     f"{list(dt.shape)} ({placements})"]
    try:
        yield
    finally:
        PENDING.global_index, PENDING.notes = saved


# ------------------------------------------------------------------------- DTensor ops
def _bad_dtensors(func: Any, args: tuple, kwargs: dict, out: Any) -> List[Any]:
    cands = [o for o in pytree.tree_leaves(out) if is_dtensor(o)]
    if mutated_args(func) != ((), ()):
        cands += [t for t in written_tensors(func, args, kwargs) if is_dtensor(t)]
    bad = []
    for dt in cands:
        shard = local(dt)
        if checkable(shard) and shard.numel() and not fast_finite(shard):
            bad.append(dt)
    return bad


def _made_here(func: Any, largs: tuple, lkwargs: dict) -> bool:
    """Does the op, run on this rank's shards alone, make the non-finite value? False when it
    comes out finite: the value came in through a redistribution inside DTensor's dispatch."""
    if uses_rng(func) or mutated_args(func) != ((), ()):
        return True   # cannot be re-run without changing the program
    try:
        again = func(*largs, **lkwargs)
    except Exception:
        return True   # shards that need communication to combine: keep the finding
    return not all_finite([t for t in pytree.tree_leaves(again) if isinstance(t, _Tensor) and checkable(t)])


def live_dtensor(live: Any, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
    """The live mode's check of a DTensor op: judge the local shards, name the global index."""
    bad = _bad_dtensors(func, args, kwargs, out)
    if not bad:
        return
    largs, lkwargs, lout = localize((args, kwargs, out))
    if not _made_here(func, largs, lkwargs):
        # this rank's shards alone give finite values: the non-finite ones came from another rank,
        # through the collective of a redistribution inside DTensor's dispatch (not visible here)
        from nanguard.torch.detector.collectives import received
        if all_finite([t for t in pytree.tree_leaves((largs, lkwargs)) if isinstance(t, _Tensor)]):
            received(live.act, func, [local(t) for t in bad], sys._getframe(1), name="redistribute")
        return
    with _indexed(bad[0]):
        live.nonfinite(func, largs, lkwargs, lout)


def replay_dtensor(replay: Any, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
    """A replay's check of a DTensor op (raises the replay's ``Found`` on a finding)."""
    from nanguard.torch.detector.replay_mode import Found
    from nanguard.torch.detector.values import judge
    bad = _bad_dtensors(func, args, kwargs, out)
    if not bad:
        return
    largs, lkwargs, lout = localize((args, kwargs, out))
    from nanguard.torch.detector.build import named_args, split_args
    tensors, scalars, _ = split_args(named_args(func, largs, lkwargs))
    ids = {id(t) for t in written_tensors(func, largs, lkwargs)}
    outs = [local(t) for t in bad]
    verdict = judge([t for _, t in tensors if id(t) not in ids], [s.value for s in scalars], outs, replay.check)
    if verdict is None or not _made_here(func, largs, lkwargs):
        return
    with _indexed(bad[0]):
        raise Found(replay.capture(func, largs, lkwargs, lout, verdict, sys._getframe(1)))


# ------------------------------------------------------------------------- module boundaries
def nested_call(act: "Activation", module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
    """Default mode, multi-rank run: an inner module call, its output checked like an
    outermost one's, so that a replay re-runs the innermost module that made the value."""
    rng = capture_rng()
    with STATE.nested(None):
        out = orig_module_call(module, *args, **kwargs)
    if act.tripped:
        return out
    flat = [local(t) for t in pytree.tree_leaves(out) if isinstance(t, _Tensor)]
    if all_finite(flat):
        return out
    from nanguard.torch.detector.values import iter_scalars, judge
    ins = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, _Tensor)]
    verdict = judge(ins + list(module.parameters()) + list(module.buffers()), iter_scalars((args, kwargs)),
                    [t for t in flat if checkable(t)], act.check)
    if verdict is not None and verdict.origin != "input":   # a NaN passed in: made by an enclosing level
        with act.suspended():
            act.modules._nonfinite(module, args, kwargs, rng, flat)
    return out


def replay_target(module: Optional[torch.nn.Module]) -> Optional[torch.nn.Module]:
    """What a replay re-runs for a recorded call of ``module``: the module a
    ``DistributedDataParallel`` wraps (its own forward adds only collectives: buffer broadcasts,
    bucket rebuilding), any other module itself."""
    ddp = getattr(torch.nn.parallel, "DistributedDataParallel", None)
    if ddp is not None and isinstance(module, ddp):
        return module.module
    return module


def note_unreproduced(report: "Report", result: Any, entries: Sequence[Any]) -> "Report":
    """Multi-rank: a backward replayed on this rank alone stayed finite, though the gradients
    were not: they came from another rank (through DDP's gradient all-reduce, say). Returns the
    report with that said (``report`` itself otherwise)."""
    from nanguard.torch.detector.outcome import NotReproduced
    if not isinstance(result, NotReproduced) or not multi_rank() or report.received_through:
        return report
    ddp = getattr(torch.nn.parallel, "DistributedDataParallel", None)
    through = "all_reduce" if ddp is not None and any(isinstance(getattr(e, "module", None), ddp)
                                                      for e in entries) else "a collective"
    what = "NaN" if report.kind == "nan" else "Inf"
    return dataclasses.replace(
        report.with_notes(f"replayed on this rank alone, the forward and backward passes stayed finite: the "
                          f"non-finite gradients came from another rank through {through}"),
        received_through=through,
        message=f"nanguard: rank {report.rank} received {what} gradients from another rank through {through}")


_REDUCTIONS = frozenset({"all_reduce", "reduce_scatter", "reduce", "all_to_all", "recv"})


def note_replay(report: "Report", error: Optional[BaseException], forward: bool) -> "Report":
    """A coarse report whose replay stopped at a collective: in a forward replay no op before
    the collective made the value, so it most likely came through it from another rank.
    Returns the report with that said (``report`` itself otherwise)."""
    # Only a reduction brings other ranks' activations in; an all-gather at the start of a module
    # gathers its parameters (FSDP), which says nothing about where the value was made.
    if not (isinstance(error, CollectiveReached) and forward and error.name in _REDUCTIONS):
        return report
    what = "NaN" if report.kind == "nan" else "Inf"
    loc = report.location()
    where = f"{loc.short_file}:{loc.line}" if loc is not None else "?"
    return dataclasses.replace(
        report.with_notes(f"no op on this rank made the value before {error.name}: it most likely arrived "
                          f"from another rank through it"),
        received_through=error.name,
        message=(f"nanguard: rank {report.rank} received {what} from another rank through {error.name} "
                 f"in {report.module or report.op} at {where}"),
        explanation=(f"replayed on this rank, {report.module or report.op} ran finite up to {error.name}; "
                     f"the non-finite values came from another rank's contribution to it."),
        suggestion=("Look at the rank that made the value: under torchrun, nanguard run --json-dir DIR "
                    "writes DIR/merged.json, which names the first rank to go non-finite."))


__all__ = ["CollectiveReached", "dtensor_type", "is_dtensor", "PENDING", "collective_name", "global_index", "live_collective",
           "live_dtensor", "local", "localize", "multi_rank", "nested_call", "note_replay", "process_rank",
           "refuse_collective", "replay_dtensor", "replay_guard", "route", "shard_offset"]
