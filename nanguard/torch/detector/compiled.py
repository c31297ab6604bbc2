"""Code compiled with ``torch.compile``: what a report says about it.

A model or function compiled *before* ``nanguard.detect()`` runs its compiled kernels inside
an outermost module call (the default mode's live check is off there); only the call's
outputs and the gradients at the end of the backward pass are checked. On a finding the
culprit is replayed eagerly (`replay.py`): the forward op by op under the dispatch-level
check (TorchDynamo does not compile under a dispatch mode, so the replay runs the Python
source, not the kernels) and then its backward, which is how a NaN made inside a compiled
backward (``CompiledFunctionBackward``) is located at the user's line.

What the replay sees is eager PyTorch, not the kernels that ran. A non-finite value that only
the compiled code makes (fused kernels that round or reassociate differently, inductor's own
random numbers for dropout, a compiler bug) is not reproduced; the report then says that
compiled code ran and how to tell the two apart. This module finds the compiled parts
(compiled modules, ``CompiledFunction`` nodes in the autograd graph) and words those notes.

It also keeps compiled code compiled once detection is over. TorchDynamo, asked to run a
compiled frame while a dispatch mode is on the stack (ours: the live mode at top level, every
op in exhaustive mode, and the replay), does not only run it eagerly: it marks the code object
"skip" for good, so the program ran uncompiled after the first finding. While a detection is
active the compiler's stance is therefore ``"force_eager"`` (compiled code runs eagerly
without consulting dynamo, nothing is marked), except inside outermost module calls in the
default mode, where the live mode is off the stack and the user's own stance comes back: the
compiled kernels run there. The stance is process-wide: while a detection is active, compiled
code on *other* threads runs eagerly too, and so does compiled code called outside any module
call (a compiled loss function or optimizer step).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch

from nanguard.torch._compat import dynamo_eval_frame
from nanguard.torch.detector.outcome import NotReproduced, ReplayResult, Reproduced

_MAX_NODES = 200_000   # a bound on the graph walk (it only runs once something is non-finite)

_LOCK = threading.Lock()
_ACTIVE = 0                    # detections holding the "force_eager" stance
_USER: Optional[Any] = None    # the stance before the first of them


def _swap(stance: Any) -> Optional[Any]:
    """Set dynamo's stance; the previous one, or None where that is impossible (a torch
    without stances, or a call from inside a region being compiled)."""
    eval_frame = dynamo_eval_frame()
    if eval_frame is None:
        return None
    try:
        return eval_frame._set_stance(stance)
    except Exception:
        return None


def force_eager() -> None:
    """A detection starts: compiled code runs eagerly from now on (see the module doc)."""
    global _ACTIVE, _USER
    with _LOCK:
        _ACTIVE += 1
        if _ACTIVE == 1:
            eval_frame = dynamo_eval_frame()
            if eval_frame is None:
                return
            _USER = _swap(eval_frame.DynamoStance("force_eager"))


def release() -> None:
    """A detection ends: the last one puts the user's stance back."""
    global _ACTIVE, _USER
    with _LOCK:
        if _ACTIVE == 0:
            return
        _ACTIVE -= 1
        if _ACTIVE == 0 and _USER is not None:
            _swap(_USER)
            _USER = None


@contextlib.contextmanager
def kernels() -> Iterator[None]:
    """Inside an outermost module call (default mode, no dispatch mode on the stack): the
    user's stance, so compiled modules run their kernels."""
    user = _USER
    prior = _swap(user) if user is not None else None
    try:
        yield
    finally:
        if prior is not None:
            _swap(prior)


def is_compiled(module: torch.nn.Module) -> bool:
    """``torch.compile(module)`` (an OptimizedModule) or ``module.compile()`` (in place)."""
    return hasattr(module, "_orig_mod") or getattr(module, "_compiled_call_impl", None) is not None


def compiled_within(module: torch.nn.Module) -> List[str]:
    """The dotted names of the compiled modules in ``module`` ("" for the module itself),
    the compiler's ``_orig_mod`` level hidden."""
    out = []
    for name, m in module.named_modules():
        if is_compiled(m):
            out.append(".".join(p for p in name.split(".") if p != "_orig_mod"))
    return out


def compiled_nodes(roots: Sequence[torch.Tensor]) -> int:
    """How many nodes of the autograd graph behind ``roots`` are compiled regions
    (``CompiledFunctionBackward``: the backward of an AOTAutograd-compiled forward)."""
    seen = set()
    todo = [r.grad_fn for r in roots if isinstance(r, torch.Tensor) and r.grad_fn is not None]
    found = 0
    while todo and len(seen) < _MAX_NODES:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node.name().startswith("CompiledFunction"):
            found += 1
        todo.extend(fn for fn, _ in node.next_functions)
    return found


def _where(names: Iterable[str], root: Optional[str]) -> str:
    parts = []
    for n in names:
        full = f"{root}.{n}" if root and n else (n or root or "")
        if full and full not in parts:
            parts.append(full)
    return ", ".join(f"`{p}`" for p in parts[:3]) + (" ..." if len(parts) > 3 else "")


def forward_notes(module: torch.nn.Module, root: Optional[str], result: ReplayResult) -> List[str]:
    """What a forward report adds when the module's call ran compiled code."""
    names = compiled_within(module)
    if not names:
        return []
    where = _where(names, root) or "the module"
    if isinstance(result, Reproduced):
        return [f"{where} is compiled (torch.compile); its forward was replayed eagerly to find the op"]
    if isinstance(result, NotReproduced):
        return [_unreproduced(where, "forward")]
    return [f"{where} is compiled (torch.compile); the eager replay could not check its ops"]


def backward_notes(roots: Sequence[torch.Tensor], modules: Sequence[Tuple[torch.nn.Module, Optional[str]]],
                   result: ReplayResult) -> List[str]:
    """What a backward report adds when the pass ran through compiled code: a compiled
    module was called in the replayed forward (``modules``: each recorded module call with
    its name), or the graph holds compiled regions."""
    names: List[str] = []
    for m, root in modules:
        names += [f"{root}.{n}" if root and n else (n or root or type(m).__name__) for n in compiled_within(m)]
    regions = compiled_nodes(roots) if not names else 0
    if not names and not regions:
        return []
    if names:
        where = _where(names, None)
    else:
        where = f"{regions} compiled region{'s' if regions != 1 else ''} (CompiledFunctionBackward)"
    if isinstance(result, Reproduced):
        return [f"{where} ran compiled (torch.compile); its forward and backward were replayed eagerly "
                f"to find the op"]
    if isinstance(result, NotReproduced):
        return [_unreproduced(where, "backward")]
    return [f"{where} ran compiled (torch.compile); the eager replay could not check its ops"]


def _unreproduced(where: str, phase: str) -> str:
    return (f"{where} ran compiled (torch.compile) and the eager replay of its {phase} did not make "
            f"this value: "
            f"the compiled kernels computed differently (fusion, reordered sums, inductor's dropout "
            f"random numbers) or wrongly; compare torch.compile(backend=\"aot_eager\") and "
            f"torch._inductor.config.fallback_random = True")


def add_notes(result: ReplayResult, notes: List[str]) -> ReplayResult:
    """``result`` with ``notes`` after a reproduced report's own (those it has already are not
    repeated); any other result as it is."""
    if not (notes and isinstance(result, Reproduced)):
        return result
    new = [n for i, n in enumerate(notes) if n not in result.report.notes and n not in notes[:i]]
    return Reproduced(result.report.with_notes(*new)) if new else result
