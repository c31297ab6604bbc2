"""Which parameters a guard watches, and the names its reports use for them.

The optimizer decides *what* is guarded (its param groups, in order); the optional model
only supplies names (``encoder.layers.3.linear1.weight``) and the module each parameter
belongs to, which the gradient-norm monitor aggregates over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple, Union

import torch

from nanguard.torch.guard.sharded import FlatShards, strip

NamedParams = Union[torch.nn.Module, Iterable[Tuple[str, torch.Tensor]]]


def check_optimizer(optimizer: object, where: str) -> torch.optim.Optimizer:
    if isinstance(optimizer, torch.optim.LBFGS):
        raise TypeError(
            f"nanguard.{where}: LBFGS cannot be guarded: its step() re-evaluates the loss "
            f"through a closure up to max_iter times, so the gradients a guard checks before "
            f"the step are not the ones it applies. Guard a first-order optimizer (SGD, Adam, "
            f"AdamW, ...), or check the closure's loss yourself with torch.isfinite"
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        hint = ""
        if isinstance(optimizer, torch.nn.Module):
            hint = " (got a model: pass the optimizer first, the model as `model=`)"
        elif isinstance(optimizer, (list, tuple)) or hasattr(optimizer, "__iter__"):
            hint = " (got parameters: build an optimizer from them, e.g. torch.optim.AdamW(params))"
        raise TypeError(
            f"nanguard.{where}: `optimizer` must be a torch.optim.Optimizer, "
            f"got {type(optimizer).__name__}{hint}"
        )
    return optimizer


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """Strip DistributedDataParallel / DataParallel (`module.`) and torch.compile (`_orig_mod.`)."""
    while True:
        inner = getattr(model, "_orig_mod", None)
        if isinstance(inner, torch.nn.Module):
            model = inner
            continue
        if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
            model = model.module
            continue
        return model


def names_from(model: Optional[NamedParams], where: str) -> Optional[Dict[int, str]]:
    """Map id(parameter) -> its name, from a module or an iterable of (name, tensor) pairs."""
    if model is None:
        return None
    if isinstance(model, torch.nn.Module):
        pairs: Iterable[Tuple[str, torch.Tensor]] = unwrap_model(model).named_parameters()
    elif isinstance(model, (str, bytes)) or not hasattr(model, "__iter__"):
        raise TypeError(
            f"nanguard.{where}: `model` must be a torch.nn.Module or an iterable of "
            f"(name, parameter) pairs such as model.named_parameters(), got {type(model).__name__}"
        )
    else:
        pairs = model
    names: Dict[int, str] = {}
    for item in pairs:
        if (not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], torch.Tensor)):
            raise TypeError(
                f"nanguard.{where}: `model` as an iterable must yield (name, tensor) pairs "
                f"like model.named_parameters(); got an item {item!r:.80}"
            )
        names.setdefault(id(item[1]), strip(item[0]))  # tied weights: the first name
    return names


@dataclass(frozen=True)
class ParamTable:
    """The optimizer's parameters in param-group order, with names and module indices."""

    params: Tuple[torch.Tensor, ...]
    names: Tuple[str, ...]
    groups: Tuple[int, ...]
    modules: Tuple[int, ...]  # index into module_names, for each parameter
    module_names: Tuple[str, ...]
    key: Tuple[int, ...]  # ids of the parameters: a changed optimizer needs a new table
    shapes: Tuple[Tuple[int, ...], ...] = ()  # full shapes (an FSDP1 slice is 1-d and partial)
    flat_owned: Optional[Tuple[Optional[bool], ...]] = None  # FSDP1: this rank counts slice i
    # positions in the model's parameter order (the optimizer's when no model was given):
    # the order in which torch's clip_grad_norm_(model.parameters()) adds up the norms
    model_order: Tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.params)


def optimizer_params(optimizer: torch.optim.Optimizer) -> List[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def optimizer_key(optimizer: torch.optim.Optimizer) -> Tuple[int, ...]:
    return tuple(map(id, optimizer_params(optimizer)))


def module_of(name: str, depth: Optional[int]) -> str:
    """`encoder.layers.3.linear1.weight` -> `encoder.layers.3.linear1` (depth None) or the
    first `depth` components (`encoder.layers` for depth 2); a root parameter is its own module."""
    parts = name.split(".")
    owner = parts[:-1] or parts
    return ".".join(owner if depth is None else owner[:depth])


def build_table(optimizer: torch.optim.Optimizer, names: Optional[Dict[int, str]],
                depth: Optional[int], where: str, flat: FlatShards | None = None) -> ParamTable:
    params: List[torch.Tensor] = []
    pnames: List[str] = []
    groups: List[int] = []
    units: List[str] = []
    for g, group in enumerate(optimizer.param_groups):
        for i, p in enumerate(group["params"]):
            if names is not None:
                name = names.get(id(p))
                if name is None:
                    raise ValueError(
                        f"nanguard.{where}: the model does not own parameter {i} of param group {g} "
                        f"(shape {list(p.shape)}); pass the model the optimizer trains, or "
                        f"model=list(a.named_parameters()) + list(b.named_parameters()) when it "
                        f"trains several"
                    )
                unit = module_of(name, depth)
            else:
                # no names: a parameter is known by its place in the optimizer, and the
                # monitor aggregates per param group
                name = f"param_groups[{g}][{i}]"
                unit = f"param_groups[{g}]"
            if flat is not None and id(p) in flat.names:
                name = flat.names[id(p)]  # FSDP1's FlatParameter: say what it holds
            params.append(p)
            pnames.append(name)
            groups.append(g)
            units.append(unit)
    module_names = tuple(dict.fromkeys(units))
    index = {m: k for k, m in enumerate(module_names)}
    shapes = tuple(flat.shapes.get(id(p), tuple(p.shape)) if flat else tuple(p.shape)
                   for p in params)
    flat_owned = tuple(flat.owned.get(id(p)) for p in params) if flat else None
    positions = range(len(params))
    if names is not None:  # a dict in the model's order (named_parameters)
        rank = {pid: r for r, pid in enumerate(names)}
        positions = sorted(positions, key=lambda i: rank[id(params[i])])
    return ParamTable(tuple(params), tuple(pnames), tuple(groups), tuple(index[u] for u in units),
                      module_names, tuple(id(p) for p in params), shapes, flat_owned,
                      tuple(positions))
