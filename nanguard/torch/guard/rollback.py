"""Rollback: the last good training state, kept in memory, and the way back to it.

Policy ``"rollback"`` keeps one snapshot of everything a step changes:

- the parameters the optimizer trains and the model's buffers (a NaN forward pass poisons
  BatchNorm's running statistics even when the step is not applied);
- the optimizer's state (Adam's moments and step counts; state that did not exist yet is
  removed again) and its param groups' hyperparameters (``lr``, ``betas``, ...);
- the state of the guard's LR scheduler(s), the GradScaler's scale and growth tracker;
- the RNG states: torch's CPU generator, every initialised CUDA device's, Python's
  ``random``, and numpy's global one when numpy is imported. A rolled-back run then goes on
  as a run resumed from a checkpoint of the snapshot would.

When: at the start of every `every`-th applied step (the first one included), after the
step passed its checks and before its update. The state then is the one the step's finite,
unspiking loss and gradients were computed from, so the snapshot is known to be good; a
snapshot taken after an update could hold the very update that a spike reveals one step
later (a learning-rate spike shows in the next step's loss).

Where: on the CPU, in buffers allocated at the first snapshot and reused (memory: one copy
of the parameters, buffers and optimizer state); pinned when the tensor is on a CUDA device,
so both copies are asynchronous (ordered on the current stream: a restore cannot overtake
the snapshot it reads, and no host code reads the buffers). FSDP2's DTensors are copied as
their local shards: every rank keeps and restores its own.

The restore writes in place (``copy_``), so DDP's hooks, FSDP2's sharded storage and the
optimizer's references stay valid, and the bits come back exactly.
"""

from __future__ import annotations

import copy
import random
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from nanguard.torch.guard import amp
from nanguard.torch.guard.sharded import local


class _Store:
    """CPU copies of tensors under keys, in buffers reused from one snapshot to the next."""

    def __init__(self) -> None:
        self._buffers: dict[Any, torch.Tensor] = {}

    def save(self, key: Any, tensor: torch.Tensor) -> None:
        src = local(tensor).detach()
        buf = self._buffers.get(key)
        if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
            buf = torch.empty(src.shape, dtype=src.dtype, device="cpu",
                              pin_memory=src.is_cuda)
            self._buffers[key] = buf
        buf.copy_(src, non_blocking=src.is_cuda)

    def load(self, key: Any, tensor: torch.Tensor) -> None:
        dst = local(tensor)
        dst.copy_(self._buffers[key], non_blocking=dst.is_cuda)

    def fits(self, key: Any, tensor: torch.Tensor) -> bool:
        buf = self._buffers.get(key)
        dst = local(tensor)
        return buf is not None and buf.shape == dst.shape and buf.dtype == dst.dtype

    def keep(self, keys: set[Any]) -> None:
        """Free the buffers of what the state no longer holds."""
        for key in [k for k in self._buffers if k not in keys]:
            del self._buffers[key]


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state and sys.modules.get("numpy") is not None:
        sys.modules["numpy"].random.set_state(state["numpy"])


@dataclass(frozen=True)
class TrainingState:
    """What a snapshot copies: the guard's parameters, optimizer, model (its buffers),
    schedulers and GradScaler."""

    params: Sequence[torch.Tensor]
    optimizer: torch.optim.Optimizer
    model: torch.nn.Module | None
    schedulers: Sequence[Any]
    scaler: Any | None


class Snapshot:
    """One copy of the training state (see the module's docstring for what it holds)."""

    def __init__(self) -> None:
        self._store = _Store()
        self._state: dict[int, dict[str, Any]] = {}  # param position -> key -> value or _TENSOR
        self._groups: list[dict[str, Any]] = []
        self._schedulers: list[Any] = []
        self._scaler: Any = None
        self._rng: dict[str, Any] = {}

    @torch.no_grad()
    def take(self, training: TrainingState) -> None:
        params, optimizer, model = training.params, training.optimizer, training.model
        store, keys = self._store, set()
        for i, p in enumerate(params):
            store.save(("param", i), p)
            keys.add(("param", i))
        for name, b in _buffers(model):
            store.save(("buffer", name), b)
            keys.add(("buffer", name))
        self._state = {}
        for i, p in enumerate(params):
            state = optimizer.state.get(p)
            if not state:
                continue
            saved: dict[str, Any] = {}
            for k, v in state.items():
                if isinstance(v, torch.Tensor):
                    store.save(("state", i, k), v)
                    keys.add(("state", i, k))
                    saved[k] = _TENSOR
                else:
                    saved[k] = copy.deepcopy(v)
            self._state[i] = saved
        store.keep(keys)
        self._groups = [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
                        for g in optimizer.param_groups]
        self._schedulers = [copy.deepcopy(s.state_dict()) for s in training.schedulers]
        self._scaler = amp.save_state(training.scaler) if training.scaler is not None else None
        self._rng = rng_state()

    @torch.no_grad()
    def restore(self, training: TrainingState) -> None:
        params, optimizer, model = training.params, training.optimizer, training.model
        store = self._store
        for i, p in enumerate(params):
            store.load(("param", i), p)
        for name, b in _buffers(model):
            if store.fits(("buffer", name), b):
                store.load(("buffer", name), b)
        for i, p in enumerate(params):
            saved = self._state.get(i)
            if saved is None:  # no state yet at the snapshot (Adam before its first step)
                optimizer.state.pop(p, None)
                continue
            state = optimizer.state[p]
            for k in [k for k in state if k not in saved]:
                del state[k]
            for k, v in saved.items():
                if v is not _TENSOR:
                    state[k] = copy.deepcopy(v)
                elif (isinstance(state.get(k), torch.Tensor)
                      and store.fits(("state", i, k), state[k])):
                    store.load(("state", i, k), state[k])
                else:
                    raise RuntimeError(
                        f"nanguard.GradGuard: cannot roll back: the optimizer state {k!r} of "
                        f"parameter {i} was replaced since the snapshot (loaded or rebuilt?)")
        for group, saved_group in zip(optimizer.param_groups, self._groups):
            group.update(copy.deepcopy(saved_group))
        for s, saved_state in zip(training.schedulers, self._schedulers):
            s.load_state_dict(copy.deepcopy(saved_state))
        if training.scaler is not None and self._scaler is not None:
            amp.load_state(training.scaler, self._scaler)
        set_rng_state(self._rng)


_TENSOR = object()  # marks an optimizer-state entry kept in the store


def _buffers(model: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    return [] if model is None else list(model.named_buffers())


class Rollback:
    """When to take the snapshot, how far a rollback goes back, and the learning-rate scale
    applied at each update after a backoff."""

    def __init__(self, every: int, lr_backoff: float | None) -> None:
        self.every = every
        self.lr_backoff = lr_backoff
        self.snapshot: Snapshot | None = None
        self.since = 0  # updates applied since the snapshot: what a rollback undoes
        self.returns = 0  # rollbacks to the current snapshot
        self._key: tuple[int, ...] | None = None  # the parameters the snapshot holds

    def due(self, key: tuple[int, ...]) -> bool:
        """Whether the step about to be applied starts with a snapshot."""
        return self.snapshot is None or self.since >= self.every or key != self._key

    def forget(self) -> None:
        """Drop the snapshot (a resume loaded another state); the next step takes one."""
        self.snapshot, self._key, self.since, self.returns = None, None, 0, 0

    def applied(self) -> None:
        """One more update went through since the snapshot."""
        self.since += 1

    def undoes(self, key: tuple[int, ...]) -> int:
        """How many applied steps a rollback now would undo."""
        return self.since if self.snapshot is not None and key == self._key else 0

    def take(self, key: tuple[int, ...], training: TrainingState) -> None:
        if self.snapshot is None or key != self._key:
            self.snapshot = Snapshot()  # new parameters (add_param_group): new buffers
        self.snapshot.take(training)
        self._key = key
        self.since = 0
        self.returns = 0

    def restore(self, key: tuple[int, ...], training: TrainingState) -> None:
        """Back to the snapshot. Without one (none taken yet, or the optimizer's parameters
        changed since) no update went through the guard since the state was last known
        good: there is nothing to undo."""
        if self.snapshot is not None and key == self._key:
            self.snapshot.restore(training)
            self.returns += 1
        self.since = 0

    def backed_off(self, scale: float) -> float | None:
        """The learning rate's scale after one more rollback (None: no backoff)."""
        return None if self.lr_backoff is None else scale * self.lr_backoff


@contextmanager
def scaled_lr(optimizer: torch.optim.Optimizer, scale: float) -> Iterator[None]:
    """Each param group's ``lr`` times `scale` for one update, then the same object back.

    The backoff is applied at the update, not written into ``param_groups``: a schedule (the
    guard's scheduler, or a loop's own ``group["lr"] = ...``, as nanoGPT's) sets ``lr`` again
    at its next step and would erase it; the schedule's own values stay as they were.
    """
    if scale == 1.0:
        yield
        return
    groups = optimizer.param_groups
    saved = [g["lr"] for g in groups]
    try:
        for g in groups:
            g["lr"] = g["lr"] * scale
        yield
    finally:
        for g, lr in zip(groups, saved):
            g["lr"] = lr
