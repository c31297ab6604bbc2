"""Headroom: how close float16/bfloat16 activations and gradients come to the dtype's maximum.

A float16 overflow rarely comes from nowhere: a weight grows a little every step, a learning
rate spike makes the updates diverge, and the largest activation climbs toward 65504 for
several steps before it becomes inf. ``GradNormMonitor(headroom=True)`` watches that climb:

* every module's output (a forward hook) and the gradient arriving at it (a hook on that
  output), for the float16 and bfloat16 tensors only, and the model's float16/bfloat16
  parameter gradients; one ``aminmax`` per tensor, kept on the device, folded over the step's
  forward passes and read once per step (one small host read). Under float16 autocast the
  float32 parameter gradients of a module whose output was float16 are judged against
  float16's range too: the matmuls that made them ran in float16;
* the headroom is ``log2(max / largest |value|)``: the bits left before the dtype's maximum
  (float16: 65504 = 2^16; bfloat16: 3.4e38 = 2^128);
* it warns (:class:`HeadroomWarning`) when the headroom of a module falls below ``bits``
  (default 2: within 4x of the maximum), when it fell at each of the last 3 steps fast
  enough that the same pace reaches the maximum within ``horizon`` steps (default 4), or when
  it fell in the last step by at least what is left (one more such step overflows: a
  learning-rate spike under Adam moves every weight by about the learning rate at once).

Dropout and Identity modules are not hooked: what they return is the input they were given
(rescaled by 1/(1-p)), measured where it was made. After the first step, the modules seen
returning only float32 (all of them in a float32 model; under autocast, those whose ops run
in float32, or that cast their output back) are unhooked: a module hook costs even when it finds nothing to watch. A module that turns to
float16 later (autocast switched on after the first step) is then not watched.

Not judged: values exactly at the dtype's maximum (``finfo.min`` is the usual attention-mask
fill; the other sign of the same tensor still is) and non-finite ones (the overflow has happened; the guard handles it), gradients while
a GradScaler is active (its dynamic scale puts them near the maximum on purpose and backs off
when they overflow), and code compiled with ``torch.compile`` (the hooks step aside while
dynamo traces, so they see only eager modules). One warning per episode: after a warning the
watch is quiet for ``quiet`` steps.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import torch

from nanguard.torch._compat import DROPOUT_TYPES, foreach_norm
from nanguard.torch.guard.params import ParamTable

LOW = {torch.float16: torch.finfo(torch.float16).max, torch.bfloat16: torch.finfo(torch.bfloat16).max}
TREND = 3            # a trend: the headroom fell at each of this many steps in a row
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
# not hooked: their output is their input (dropout rescales it by 1/(1-p)), already measured
# where it was made
_PASS_THROUGH = (*DROPOUT_TYPES, torch.nn.Identity)
_KINDS = {"activation": "output of", "gradient": "gradient at the output of",
          "parameter gradient": "gradient of the parameters of"}


class HeadroomWarning(RuntimeWarning):
    """A float16/bfloat16 activation or gradient is approaching the dtype's maximum.

    The warning carries the structured finding as ``.alert`` (a :class:`HeadroomAlert`)."""

    def __init__(self, message: str, alert: Optional["HeadroomAlert"] = None) -> None:
        super().__init__(message)
        self.alert = alert


@dataclass(frozen=True)
class HeadroomAlert:
    """One headroom warning: which tensor, how close to the maximum, how fast it closes in."""

    step: int
    kind: str        # "activation", "gradient" (at a module's output) or "parameter gradient"
    module: str
    dtype: str       # "float16" or "bfloat16"
    peak: float      # the largest |value| of the step
    bits: float      # log2(dtype max / peak): the headroom left, in bits
    reason: str      # "near" (below `bits`), "trend" (falling toward the maximum) or "jump"
    rate: float      # bits lost per step (over the last 3 steps; "jump": in the last one)
    steps_left: Optional[float]  # bits / rate: steps to the maximum at that pace

    def short(self) -> str:
        eta = f", overflow in ~{self.steps_left:.1f} steps" if self.steps_left is not None else ""
        return (f"step {self.step}: {self.dtype} {_KINDS[self.kind]} `{self.module}` reached "
                f"{self.peak:.3g}, {self.bits:.2g} bits below the maximum{eta}")

    def message(self) -> str:
        top = LOW[getattr(torch, self.dtype)]
        lines = [f"nanguard: {self.dtype} headroom is running out (step {self.step}); an overflow to "
                 f"inf is likely soon.",
                 f"  {_KINDS[self.kind]} `{self.module}`: largest |value| {self.peak:.3g}, "
                 f"{2 ** self.bits:.3g}x ({self.bits:.2f} bits) below {self.dtype}'s max {top:.5g}"]
        if self.rate > 0:
            eta = f"; at this pace it overflows in ~{self.steps_left:.1f} steps" if self.steps_left else ""
            over = "in the last step" if self.reason == "jump" else f"a step over the last {TREND} steps"
            lines.append(f"  it lost {self.rate:.2f} bits ({2 ** self.rate:.3g}x) {over}{eta}")
        lines.append("  look for weights growing without bound, a learning rate too high, a missing "
                     "scale or normalisation; keep that op in float32 or use bfloat16")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class HeadroomWatch:
    """The hooks and the test behind ``GradNormMonitor(headroom=...)`` (see the module doc)."""

    def __init__(self, bits: float = 2.0, horizon: int = 4, quiet: int = 50, warn: bool = True) -> None:
        self.bits = float(bits)
        self.horizon = horizon
        self.quiet = quiet
        self.warn = warn
        self.alerts: List[HeadroomAlert] = []
        self.names: List[str] = []                   # watched modules, by hook index
        # (kind, index, dtype) -> (min, max) of the step so far, device tensors
        self._seen: Dict[Tuple[str, int, torch.dtype], Tuple[torch.Tensor, torch.Tensor]] = {}
        self._series: Dict[Tuple[str, str, str], Deque[float]] = {}
        self._handles: List[Any] = []
        self._grad_hooks: List[Callable[[torch.Tensor], None]] = []
        self._table: Optional[ParamTable] = None
        self._scaled: Callable[[], bool] = lambda: False
        self._quiet_until = -1
        self._generation = 0    # bumped by remove(): hooks still on live tensors fall silent
        self._plain: set = set()  # modules seen returning no float16/bfloat16 tensor
        self._pruned = False

    # -- wiring ------------------------------------------------------------------------
    def attach(self, model: Optional[torch.nn.Module], scaled: Callable[[], bool]) -> None:
        """Hook every module of ``model``; ``scaled()`` says whether a GradScaler is active."""
        self.remove()
        self._scaled = scaled
        if model is None:
            return
        for name, module in model.named_modules():
            if isinstance(module, _PASS_THROUGH):
                continue
            index = len(self.names)
            self.names.append(".".join(p for p in name.split(".") if p != "_orig_mod") or "(model)")
            self._grad_hooks.append(functools.partial(self._on_grad, self._generation, index))
            self._handles.append(module.register_forward_hook(
                functools.partial(self._on_output, self._generation, index)))

    def bind(self, table: ParamTable) -> None:
        self._table = table

    def remove(self) -> None:
        """Take the hooks off the model."""
        for h in self._handles:
            if h is not None:
                h.remove()
        self._handles, self._grad_hooks, self.names = [], [], []
        self._seen.clear()
        self._plain.clear()
        self._pruned = False
        self._generation += 1

    def _prune(self, seen: Dict[Tuple[str, int, torch.dtype], Any]) -> None:
        """After the first step: unhook the modules that returned only float32 (a float32
        model, or LayerNorm under autocast); a module hook costs even when it finds nothing."""
        self._pruned = True
        low = {index for kind, index, _ in seen if kind == "activation"}
        for index in self._plain - low:
            handle = self._handles[index]
            if handle is not None:
                handle.remove()
                self._handles[index] = None
        self._plain.clear()

    # -- hooks -------------------------------------------------------------------------
    def _fold(self, kind: str, index: int, t: torch.Tensor) -> None:
        mn, mx = torch.aminmax(t.detach())
        key = (kind, index, t.dtype)
        old = self._seen.get(key)
        self._seen[key] = (mn, mx) if old is None else (torch.minimum(old[0], mn), torch.maximum(old[1], mx))

    def _on_output(self, generation: int, index: int, module: torch.nn.Module, args: Any, output: Any) -> None:
        if _is_compiling() or generation != self._generation:
            return
        low = False
        for t in _tensors(output):
            if t.dtype in LOW and t.numel():
                low = True
                self._fold("activation", index, t)
                if t.requires_grad and torch.is_grad_enabled():
                    t.register_hook(self._grad_hooks[index])
        if not low and not self._pruned:
            self._plain.add(index)

    def _on_grad(self, generation: int, index: int, grad: torch.Tensor) -> None:
        if generation != self._generation:
            return
        if grad is not None and grad.dtype in LOW and grad.numel() and not grad.is_sparse:
            self._fold("gradient", index, grad)

    # -- the test ----------------------------------------------------------------------
    def observe(self, step: int, bad: bool) -> Optional[HeadroomAlert]:
        """Judge the step's peaks; return (and warn with) an alert if one fires."""
        peaks = self._peaks()
        alert = None
        candidates = []
        for key, (peak, dtype) in peaks.items():
            top = LOW[dtype]
            if not (0 < peak < top):    # 0, exactly the maximum (a mask fill) or non-finite
                continue
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = deque(maxlen=TREND + 1)
            bits = math.log2(top / peak)
            series.append(bits)
            if bad or step <= self._quiet_until:
                continue
            found = self._judge(series)
            if found is not None:
                candidates.append((found[2], key, peak, bits, dtype, found))
        if candidates:
            _, (kind, module, _), peak, bits, dtype, (reason, rate, urgency) = min(candidates, key=lambda c: c[0])
            alert = HeadroomAlert(step=step, kind=kind, module=module, dtype=str(dtype).replace("torch.", ""),
                                  peak=peak, bits=bits, reason=reason, rate=rate,
                                  steps_left=bits / rate if rate > 0 else None)
            self._quiet_until = step + self.quiet
            self.alerts.append(alert)
            del self.alerts[:-1000]
            if self.warn:
                warnings.warn(HeadroomWarning(alert.message(), alert), stacklevel=6)
        return alert

    def _judge(self, series: Deque[float]) -> Optional[Tuple[str, float, float]]:
        """(reason, bits lost per step, urgency: projected steps left) or None."""
        bits = series[-1]
        rate = 0.0
        falling = len(series) == TREND + 1 and all(b > a for a, b in zip(list(series)[1:], series))
        if falling:
            rate = (series[0] - bits) / TREND
        if bits < self.bits:
            return "near", rate, bits / rate if rate > 0 else bits
        if falling and bits <= self.horizon * rate:
            return "trend", rate, bits / rate
        drop = series[-2] - bits if len(series) > 1 else 0.0
        if drop > 0 and bits <= drop:   # one more step like the last one reaches the maximum
            return "jump", drop, bits / drop
        return None

    def _peaks(self) -> Dict[Tuple[str, str, str], Tuple[float, torch.dtype]]:
        """The step's largest |value| per (kind, module, dtype), in one host read."""
        seen, self._seen = self._seen, {}
        if not self._pruned:
            self._prune(seen)
        keys: List[Tuple[str, str, torch.dtype]] = []
        mins: List[torch.Tensor] = []
        maxs: List[torch.Tensor] = []
        scaled = self._scaled()
        for (kind, index, dtype), (mn, mx) in seen.items():
            if kind == "gradient" and scaled:
                continue
            keys.append((kind, self.names[index], dtype))
            mins.append(mn)
            maxs.append(mx)
        table = self._table
        if table is not None and not scaled:
            # a module whose output was float16 ran under float16 autocast: its float32
            # parameter gradients came out of float16 matmuls, so float16's range is theirs
            f16 = {self.names[i] for kind, i, dtype in seen if kind == "activation" and dtype == torch.float16}
            grads = []
            for p, m in zip(table.params, table.modules):
                g = p.grad
                if g is not None and hasattr(g, "to_local"):   # a DTensor (FSDP2): this rank's shard
                    g = g.to_local()
                if g is None or g.layout != torch.strided or not g.numel():
                    continue
                if g.dtype in LOW:
                    grads.append((m, g, g.dtype))
                elif g.dtype == torch.float32 and table.module_names[m] in f16:
                    grads.append((m, g, torch.float16))
            if grads:
                norms = foreach_norm([g for _, g, _ in grads], float("inf"))
                for (m, _, dtype), n in zip(grads, norms):
                    keys.append(("parameter gradient", table.module_names[m], dtype))
                    mins.append(-n)
                    maxs.append(n)
        if not keys:
            return {}
        devices = {t.device for t in maxs}
        if len(devices) > 1:
            mins, maxs = [t.cpu() for t in mins], [t.cpu() for t in maxs]
        lows, highs = torch.stack([torch.stack(mins).float(), torch.stack(maxs).float()]).tolist()
        out: Dict[Tuple[str, str, str], Tuple[float, torch.dtype]] = {}
        for (kind, name, dtype), low, high in zip(keys, lows, highs):
            # a side exactly at the maximum is a fill (finfo.min masks the scores beside it)
            top = LOW[dtype]
            v = max(-low if -low != top else 0.0, high if high != top else 0.0)
            if low != low or high != high:
                v = math.nan
            key = (kind, name, str(dtype))
            if key not in out or v > out[key][0] or v != v:
                out[key] = (v, dtype)
        return out


def _tensors(output: Any, depth: int = 0) -> List[torch.Tensor]:
    """The tensors a module returned: a tensor, or inside tuples, lists and dicts (HF's
    ModelOutput is a dict), two levels deep."""
    if isinstance(output, torch.Tensor):
        return [output]
    if depth > 1:
        return []
    if isinstance(output, (tuple, list)):
        items = output
    elif isinstance(output, dict):
        items = list(output.values())
    else:
        return []
    out: List[torch.Tensor] = []
    for item in items:
        out += _tensors(item, depth + 1)
    return out
