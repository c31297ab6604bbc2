"""The tape: the coarse calls of the program that a backward pass may need to replay.

An entry is one *top-level* call made with autograd recording: an aten op called outside any
module, an outermost ``nn.Module`` call, or an ``autograd.grad(create_graph=True)``. It keeps
what replaying it needs: the callable, its arguments (tensors held by reference, like the
autograd graph holds its saved tensors), the RNG state before the call, and keys
``(id(tensor), tensor._version)`` that say which tensor came out of which entry.

Lifetime follows the graph, so nothing outlives a training step: entries are dropped when the
backward pass that consumes them finishes (unless ``retain_graph``), when every output they
produced has been freed (a graph nobody differentiates), and when detection ends.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.torch.detector.frames import Frame

Key = Tuple[int, int]


def key_of(t: torch.Tensor) -> Key:
    try:
        return (id(t), t._version)
    except RuntimeError:  # inference tensors have no version counter
        return (id(t), -1)


class _Slot:
    """Placeholder for the i-th tensor in an entry's argument template."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class ViewOfBase:
    """How a mutated view relates to its base, so a replay can mutate the replayed base."""

    __slots__ = ("base", "base_key_before", "base_key_after", "size", "stride", "offset")

    def __init__(self, base: torch.Tensor, before: Key, size: Tuple[int, ...], stride: Tuple[int, ...],
                 offset: int) -> None:
        self.base = base            # a clone of the base before the mutation
        self.base_key_before = before
        self.base_key_after: Optional[Key] = None
        self.size, self.stride, self.offset = size, stride, offset


class Entry:
    """One replayable top-level call."""

    __slots__ = ("seq", "kind", "fn", "module", "spec", "leaves", "inputs", "in_keys", "req", "out_keys", "rng",
                 "frame", "refs", "alive", "released", "tape", "views", "autocast", "weak", "parents", "consumers",
                 "__weakref__")

    def __init__(self, tape: "Tape", kind: str, fn: Any, module: Optional[torch.nn.Module] = None) -> None:
        self.seq = next(tape.counter)
        self.kind = kind            # "op" | "module" | "grad"
        self.fn = fn
        self.module = module
        self.spec: Any = None
        self.leaves: List[Any] = []  # the argument pytree's leaves, tensors replaced by _Slot
        self.inputs: List[torch.Tensor] = []
        self.in_keys: List[Key] = []
        self.req: List[bool] = []    # requires_grad of each input when it was recorded
        self.out_keys: List[Key] = []
        self.rng: Optional[tuple] = None
        self.frame: Optional[Frame] = None
        self.refs: List[Optional[weakref.ref]] = []   # one per out_keys entry (None: not weakly referenceable)
        self.alive = 0
        self.released = False
        self.tape = tape
        self.views: Dict[int, ViewOfBase] = {}
        self.autocast: Optional[tuple] = None   # autocast settings of a module call
        # Inputs another entry produced are held weakly (slot -> (weakref, producer, output
        # index); None in `inputs`): a replay recomputes them from that entry, and holding them
        # would keep alive what the program has freed (the logits' copies of a loss computed in
        # the training loop). A freed tensor's id can be reused, so a replay finds these inputs
        # by (producer, index), never by their key.
        self.weak: Dict[int, Tuple[weakref.ref, "Entry", int]] = {}
        self.parents: List["Entry"] = []     # the entries that produced the weak inputs
        self.consumers = 0                   # entries on the tape that hold an output of this one weakly

    # -------------------------------------------------------------- recording
    def set_args(self, args: Sequence[Any], kwargs: Dict[str, Any], mutated: Iterable[int] = ()) -> None:
        """Template the arguments; ``mutated`` holds the ids of tensors the call writes to."""
        if not kwargs and not mutated and all(type(a) is torch.Tensor or isinstance(a, torch.Tensor) for a in args):
            # The common module call, model(x): no pytree walk needed.
            self.spec = len(args)
            self.in_keys = [key_of(a) for a in args]
            self.inputs = [self._hold(i, a, k) for i, (a, k) in enumerate(zip(args, self.in_keys))]
            self.req = [a.requires_grad for a in args]
            self.leaves = [_Slot(i) for i in range(len(args))]
            return
        leaves, self.spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        mutated = set(mutated)
        out: List[Any] = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                slot = len(self.inputs)
                k = key_of(leaf)
                if id(leaf) in mutated:
                    # The call changes this tensor in place: keep its value from before.
                    held = leaf.detach().clone()
                    base = leaf._base
                    if base is not None:
                        self.views[slot] = ViewOfBase(base.detach().clone(), key_of(base), tuple(leaf.size()),
                                                      tuple(leaf.stride()), leaf.storage_offset() - base.storage_offset())
                    self.inputs.append(held)
                else:
                    self.inputs.append(self._hold(slot, leaf, k))
                self.in_keys.append(k)
                self.req.append(leaf.requires_grad)
                out.append(_Slot(slot))
            else:
                out.append(leaf)
        self.leaves = out

    def _hold(self, slot: int, t: torch.Tensor, k: Key) -> Optional[torch.Tensor]:
        """``t`` itself, or None with a weak reference when an entry on the tape produced it."""
        producer = self.tape.producer(k)
        if producer is None:
            return t
        index = next((i for i, r in enumerate(producer.refs) if r is not None and r() is t), None)
        if index is None:
            return t
        try:
            self.weak[slot] = (weakref.ref(t), producer, index)
        except TypeError:
            return t
        if all(p is not producer for p in self.parents):
            self.parents.append(producer)
        return None

    def input(self, slot: int) -> Optional[torch.Tensor]:
        """The recorded input of ``slot`` (None when it was held weakly and has been freed)."""
        t = self.inputs[slot]
        if t is None:
            held = self.weak.get(slot)
            t = held[0]() if held is not None else None
        return t

    def set_outputs(self, tensors: Sequence[torch.Tensor], mutated_views: Sequence[Tuple[int, torch.Tensor]] = ()) -> None:
        for t in tensors:
            self.out_keys.append(key_of(t))
            try:
                self.refs.append(weakref.ref(t, self._on_dead))
                self.alive += 1
            except TypeError:
                self.refs.append(None)
        for slot, view in mutated_views:
            info = self.views.get(slot)
            base = view._base
            if info is not None and base is not None:
                info.base_key_after = key_of(base)

    def _on_dead(self, ref: weakref.ref) -> None:
        # Runs in whichever thread freed the tensor; only touches this entry and a dict.
        # The freed tensor's key may be reused by a new tensor: it no longer names this output.
        for i, r in enumerate(self.refs):
            if r is ref and i < len(self.out_keys):
                k = self.out_keys[i]
                if self.tape.by_key.get(k) is self:
                    del self.tape.by_key[k]
                break
        self.alive -= 1
        if self.alive <= 0 and self.consumers <= 0:
            self.tape.discard(self)

    # -------------------------------------------------------------- replaying
    def output_alive(self, index: int) -> bool:
        """Whether the program still holds output ``index`` (so its key still names it)."""
        r = self.refs[index] if index < len(self.refs) else None
        return r is None or r() is not None

    def arguments(self, values: Sequence[Any]) -> Tuple[tuple, dict]:
        leaves = [values[x.index] if isinstance(x, _Slot) else x for x in self.leaves]
        if isinstance(self.spec, int):
            return tuple(leaves), {}
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return args, kwargs

    def release(self) -> None:
        self.released = True
        self.inputs = []
        self.leaves = []
        self.views = {}
        self.refs = []
        self.weak = {}
        self.rng = None
        self.module = None


class Tape:
    """The entries of one thread's active detection, in call order."""

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.entries: Dict[int, Entry] = {}
        self.by_key: Dict[Key, Entry] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: Entry) -> None:
        self.entries[entry.seq] = entry
        for parent in entry.parents:
            parent.consumers += 1
        for k in entry.out_keys:
            self.by_key[k] = entry
        for info in entry.views.values():
            if info.base_key_after is not None:
                self.by_key[info.base_key_after] = entry

    def discard(self, entry: Entry) -> None:
        todo = [entry]
        while todo:
            e = todo.pop()
            if self.entries.pop(e.seq, None) is None:
                continue
            for k in e.out_keys:
                if self.by_key.get(k) is e:
                    del self.by_key[k]
            for info in e.views.values():
                if info.base_key_after is not None and self.by_key.get(info.base_key_after) is e:
                    del self.by_key[info.base_key_after]
            parents, e.parents = e.parents, []
            e.release()
            # A producer kept only for this entry's weak inputs can go with it.
            for parent in parents:
                parent.consumers -= 1
                if parent.consumers <= 0 and parent.alive <= 0:
                    todo.append(parent)

    def producer(self, k: Key, before: Optional[int] = None) -> Optional[Entry]:
        e = self.by_key.get(k)
        if e is None or e.released or (before is not None and e.seq >= before):
            return None
        return e

    def ancestry(self, roots: Iterable[torch.Tensor]) -> List[Entry]:
        """The entries that produced ``roots``, directly or through other entries, in call order."""
        found: Dict[int, Entry] = {}
        todo: List[Any] = [(key_of(r), None) for r in roots if isinstance(r, torch.Tensor)]
        while todo:
            item = todo.pop()
            e = item if isinstance(item, Entry) else self.producer(*item)
            if e is None or e.released or e.seq in found:
                continue
            found[e.seq] = e
            todo.extend((ik, e.seq) for ik in e.in_keys)
            todo.extend((v.base_key_before, e.seq) for v in e.views.values())
            todo.extend(e.parents)   # producers of weak inputs, even if a later tensor took over their key
        return [found[s] for s in sorted(found)]

    def release(self, entries: Iterable[Entry]) -> None:
        for e in list(entries):
            self.discard(e)

    def clear(self) -> None:
        for e in list(self.entries.values()):
            self.discard(e)
        self.by_key.clear()


def leaves_of(entries: Sequence[Entry], params_of: Callable[[torch.nn.Module], List[torch.Tensor]]
              = lambda m: list(m.parameters())) -> List[torch.Tensor]:
    """Leaf tensors that receive ``.grad`` from a backward through these entries."""
    out: Dict[int, torch.Tensor] = {}
    tape_keys = set()
    for e in entries:
        tape_keys.update(e.out_keys)
    for e in entries:
        if e.kind == "module" and e.module is not None:
            for p in params_of(e.module):
                if p.requires_grad:
                    out[id(p)] = p
        for slot, (t, k) in enumerate(zip(e.inputs, e.in_keys)):
            if t is None or k in tape_keys or slot in e.views or k[0] != id(t):
                continue  # produced by the tape, or a copy kept for an in-place call
            if t.requires_grad and t.is_leaf:
                out[id(t)] = t
    return list(out.values())
