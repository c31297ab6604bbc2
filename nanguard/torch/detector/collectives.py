"""Collectives in multi-rank runs: received values, and replays that must not communicate.

* A collective (``all_reduce``, ``all_gather``, ``reduce_scatter``...) whose output is
  non-finite while this rank's input was finite did not make the value: this rank *received*
  it from another one. The live mode (`live_collective`) reports it with ``received_through``
  and it is not an origin; the rank that made the value reports the origin.
* A replay re-runs code on one rank only: a collective there would wait forever for the other
  ranks. In a multi-rank run a replay stops at the first collective (`CollectiveReached`),
  those the replay's dispatch mode sees and those DTensor runs inside its own dispatch
  (`replay_guard`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Sequence, Tuple

import torch

from nanguard.core.report import Report
from nanguard.torch._compat import c10d_functional, current_autograd_node, pytree
from nanguard.torch.detector._state import STATE
from nanguard.torch.detector.aten import written_tensors
from nanguard.torch.detector.values import all_finite, checkable, fast_finite, has_nan

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation

_Tensor = torch.Tensor
_current_node = current_autograd_node


def _local(t: Any) -> Any:
    from nanguard.torch.detector.sharded import local
    return local(t)


def _multi_rank() -> bool:
    from nanguard.torch.detector.sharded import multi_rank
    return multi_rank()

COLLECTIVE, SKIP = 1, 2
_COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional"})
# ops of those namespaces that move no values between ranks
_LOCAL = frozenset({"wait_tensor", "_wrap_tensor_autograd", "monitored_barrier_", "barrier"})
ROUTES: Dict[Any, int] = {}


def route(func: Any) -> int:
    """0 for an ordinary op, `COLLECTIVE` for one that exchanges values with other ranks,
    `SKIP` for FSDP's copy ops and the collectives' bookkeeping (they make no new values)."""
    hit = ROUTES.get(func)
    if hit is None:
        ns = getattr(func, "namespace", "")
        base = getattr(func, "__name__", "").split(".")[0]
        if ns in _COLLECTIVE_NAMESPACES:
            hit = SKIP if base in _LOCAL else COLLECTIVE
        else:
            hit = SKIP if ns == "fsdp" else 0
        ROUTES[func] = hit
    return hit


_NAMES = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
          ("reduce_scatter", "reduce_scatter"), ("all_reduce", "all_reduce"), ("all_gather", "all_gather"),
          ("alltoall", "all_to_all"), ("all_to_all", "all_to_all"), ("broadcast", "broadcast"),
          ("scatter", "scatter"), ("gather", "gather"), ("recv", "recv"), ("reduce", "reduce"))


def collective_name(func: Any) -> str:
    """``all_reduce`` for ``c10d.allreduce_`` and ``_c10d_functional.all_reduce`` alike."""
    base = (func if isinstance(func, str) else getattr(func, "__name__", str(func))).split(".")[0].strip("_")
    for key, name in _NAMES:
        if key in base:
            return name
    return base


class CollectiveReached(Exception):
    """A multi-rank replay reached a collective: the other ranks are not running it, so the
    replay stops there instead of waiting for them forever."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the replay reached {name}, a collective the other ranks are not running, and stopped "
                         f"there")
        self.name = name


def refuse_collective(func: Any) -> None:
    """Called by a replay for a collective op: stop the replay when other ranks exist."""
    if _multi_rank():
        raise CollectiveReached(collective_name(func))


def replay_special(func: Any, args: tuple, kwargs: dict) -> Any:
    """A replay meets a collective (stopped when other ranks exist) or an op making no values."""
    if route(func) == COLLECTIVE:
        refuse_collective(func)
    return func(*args, **kwargs)


_FUNCTIONAL = ("all_reduce", "all_reduce_", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
               "broadcast", "broadcast_", "all_reduce_coalesced", "all_gather_into_tensor_coalesced",
               "reduce_scatter_tensor_coalesced", "isend", "irecv", "batch_p2p_ops")


@contextlib.contextmanager
def replay_guard() -> Iterator[None]:
    """While a multi-rank replay runs: the functional collectives that DTensor calls *inside*
    its own dispatch (where no dispatch mode sees them) raise `CollectiveReached` too."""
    if not _multi_rank():
        yield
        return
    ns = c10d_functional()
    saved = {}
    for name in _FUNCTIONAL:
        if hasattr(ns, name):
            saved[name] = getattr(ns, name)
            setattr(ns, name, _Refusal(name))
    try:
        yield
    finally:
        for name, op in saved.items():
            setattr(ns, name, op)


class _Refusal:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CollectiveReached(collective_name(self.name))

    def __getattr__(self, attr: str) -> Any:   # ``.default`` overloads
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self


def _tensors(tree: Any) -> List[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, _Tensor)]


def _wait(out: Any) -> None:
    """Complete an asynchronous collective now, so its output's values can be read."""
    for o in pytree.tree_leaves(out):
        if isinstance(o, _Tensor):
            continue
        wait = getattr(o, "wait", None)
        if callable(wait):
            wait()


def sent_and_written(func: Any, args: tuple, kwargs: dict) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
    """(sent, written): the tensors a collective reads on this rank and those it writes.

    c10d's schemas mark no argument as written, so its arguments are told apart by name: an
    ``output*`` buffer only receives (its old contents, often ``torch.empty``'s garbage, are
    never sent: judging them would call a NaN bit pattern in an unwritten buffer this rank's
    own), ``input*`` only sends, and the ``tensors`` of an in-place collective (all_reduce,
    broadcast) both send and receive, except those of ``recv``, which only receive. Other ops
    (the functional collectives) write what their schema marks and send the rest."""
    schema = getattr(func, "_schema", None)
    if getattr(func, "namespace", "") != "c10d" or schema is None:
        written = written_tensors(func, args, kwargs)
        ids = {id(t) for t in written}
        return [t for t in _tensors((args, kwargs)) if id(t) not in ids] or written, written
    receives_only = "recv" in getattr(func, "__name__", "")
    sent: List[torch.Tensor] = []
    written = []
    for i, argument in enumerate(schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        tensors = _tensors(value)
        if argument.name.startswith("output"):
            written += tensors
        elif argument.name.startswith("input"):
            sent += tensors
        else:
            written += tensors
            if not receives_only:
                sent += tensors
    return sent, written


def live_collective(live: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run a collective for the live mode; report values that arrived non-finite through it."""
    act = live.act
    sent, written = sent_and_written(func, args, kwargs)
    finite_before = all_finite([_local(t) for t in sent])
    out = func(*args, **kwargs)
    if not finite_before or act.tripped:
        return out
    if getattr(func, "namespace", "") != "c10d":
        for t in _tensors(out):
            c10d_functional().wait_tensor(t)
    else:
        _wait(out)
    got = [_local(t) for t in _tensors(out) + written]
    if not all_finite(got):
        _received(act, func, got, sys._getframe(1))
    return out


def received(act: "Activation", func: Any, got: Sequence[torch.Tensor], frame_obj: Any,
             name: str = "") -> None:
    """Report values that arrived from another rank through ``name`` (the collective ``func``)."""
    _received(act, func, got, frame_obj, name)


def _received(act: "Activation", func: Any, got: Sequence[torch.Tensor], frame_obj: Any, name: str = "") -> None:
    from nanguard.torch.detector.build import make_report
    from nanguard.torch.detector.frames import user_frame, user_stack
    kind = "nan" if any(has_nan(t) for t in got) else "inf"
    if kind not in act.check:
        return
    name = name or collective_name(func)
    node = _current_node()
    # FSDP's reduce-scatter runs in a callback at the end of the backward pass: no node, but in it
    phase = "backward" if node is not None or STATE.in_backward else ("optimizer" if STATE.in_optimizer else "forward")
    here = user_frame(frame_obj)
    bad = [(f"out[{i}]", t) for i, t in enumerate(got) if checkable(t) and not fast_finite(t)]
    report = make_report(phase=phase, kind=kind, op=str(func), inputs=[], outputs=bad[:4], frame=here,
                         module=act.naming.live_path() if node is None else None, call_frame=here,
                         api=f"torch.distributed.{name}" if name.isidentifier() else None,
                         stack=user_stack(frame_obj), step=act.step(),
                         how="live check of a collective's output against this rank's input",
                         notes=[f"this rank's input to {name} was finite: the value was made on another rank"])
    what = "NaN" if kind == "nan" else "Inf"
    where = f"{here.short_file}:{here.line}" if here is not None else "an unknown line"
    report = dataclasses.replace(
        report, received_through=name,
        message=f"nanguard: rank {report.rank} received {what} from another rank through {name} at {where}",
        explanation=(f"{name} combined this rank's finite values with non-finite ones sent by another rank; "
                     f"this rank did not make them."),
        suggestion=("Look at the rank that made the value: run under torchrun with nanguard run --json-dir DIR "
                    "and read DIR/merged.json, which names the first rank to go non-finite."))
    act.finish(report)


__all__ = ["COLLECTIVE", "CollectiveReached", "ROUTES", "SKIP", "collective_name", "live_collective",
           "note_backward", "received", "refuse_collective", "replay_guard", "replay_special", "route",
           "sent_and_written", "watching"]


# ------------------------------------------------------------------ collectives inside backward()
# The default mode does not look inside a backward pass; in a multi-rank run it still notes, for
# each collective that FSDP (or a hook) starts there, whether this rank's input was finite: a
# device-side sum per collective, read only when the pass's gradients come out non-finite.
_WATCHED = (("reduce_scatter_single", "input", 1), ("reduce_scatter_tensor", "input", 1), ("all_reduce", "tensor", 0))


@contextlib.contextmanager
def watching(enabled: bool) -> Iterator[List[tuple]]:
    """Around a backward pass: ``(name, sum of this rank's input)`` of each collective started."""
    seen: List[tuple] = []
    dist = sys.modules.get("torch.distributed")
    if not enabled or dist is None:
        yield seen
        return
    saved = {}
    for name, key, position in _WATCHED:
        fn = getattr(dist, name, None)
        if callable(fn):
            saved[name] = fn
            setattr(dist, name, _noting(fn, collective_name(name), key, position, seen))
    try:
        yield seen
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)


def _noting(fn: Any, name: str, key: str, position: int, seen: List[tuple]) -> Any:
    def noted(*args: Any, **kwargs: Any) -> Any:
        sent = kwargs.get(key, args[position] if len(args) > position else None)
        if isinstance(sent, _Tensor) and sent.is_floating_point():
            with torch.no_grad():
                seen.append((name, sent.detach().sum(dtype=torch.float64)))   # no host sync here
        return fn(*args, **kwargs)
    noted.__wrapped__ = fn  # type: ignore[attr-defined]
    return noted


def note_backward(report: Report, seen: Sequence[tuple]) -> Report:
    """A backward pass whose gradients came out non-finite, after collectives: if this rank sent
    only finite values into them, it received the non-finite ones; otherwise it made them.
    Returns the report with what that says (``report`` itself without collectives)."""
    if not seen:
        return report
    import math
    sent_bad = [name for name, total in seen if not math.isfinite(float(total))]
    what = "NaN" if report.kind == "nan" else "Inf"
    if sent_bad:
        return dataclasses.replace(
            report.with_notes(f"this rank's own gradients were already non-finite when it sent them into "
                              f"{sent_bad[0]}: they were made on this rank"),
            message=(f"nanguard: rank {report.rank}'s backward pass made {what} gradients (sent into "
                     f"{sent_bad[0]}; the op was not located: exhaustive=True checks each backward op)"))
    names = [name for name, _ in seen]
    through = "reduce_scatter" if "reduce_scatter" in names else names[-1]
    return dataclasses.replace(
        report.with_notes(f"this rank sent only finite gradients into {', '.join(sorted(set(names)))}: the "
                          f"non-finite ones arrived from another rank through {through}"),
        received_through=through,
        message=f"nanguard: rank {report.rank} received {what} gradients from another rank through {through}")
