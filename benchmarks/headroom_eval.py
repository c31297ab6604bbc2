"""How well the float16/bfloat16 headroom watch warns: lead before a planted overflow, and
false alarms on healthy runs. Not a timing benchmark (its cost: ``benchmarks/guard.py``).

Planted overflows, each in float16 weights ("half") and in float16 autocast ("autocast"):

- ``mlp grow Nx``: a 3-layer MLP (SGD 0.01) whose middle weight is multiplied by N after
  every step, until an output or a gradient overflows;
- ``mlp lr xK``: the same MLP, its learning rate multiplied by K at step 30 (diverges);
- ``gpt2 grow Nx`` / ``gpt2 lr 1.0``: transformers' GPT-2 (2 layers, 64 wide, AdamW 1e-3),
  an MLP projection multiplied by N every step, or the learning rate set to 1.0 at step 10.

The overflow is the first step whose output is non-finite or whose step the guard skips;
*lead* is the overflow step minus the first warning's step (0: no warning before it).
Healthy: GPT-2 and BERT, 30 AdamW steps on random tokens with padding, in float16 and
bfloat16 autocast and float16 weights; every warning there is a false alarm.

    .venv/bin/python benchmarks/headroom_eval.py
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Callable, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import nanguard  # noqa: E402
from benchmarks.common import print_table  # noqa: E402


def _hf(name: str) -> torch.nn.Module:
    import transformers
    torch.manual_seed(0)
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=100))
    return transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100,
        max_position_embeddings=32))


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, half: bool, autocast: Optional[torch.dtype],
           batch: Callable[[int], Tuple[torch.Tensor, ...]], loss_of: Callable, after: Callable[[int], None],
           steps: int) -> Tuple[Optional[int], nanguard.GradNormMonitor]:
    monitor = nanguard.GradNormMonitor(window=20, headroom=True, warn=False)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor, max_consecutive=None)
    for step in range(1, steps + 1):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=autocast or torch.float16, enabled=autocast is not None):
            out, loss = loss_of(model, *batch(step))
        loss.backward()
        if not guard.step() or not torch.isfinite(out).all():
            return step, monitor
        after(step)
    return None, monitor


def mlp(precision: str, grow: float = 1.0, lr_times: Optional[float] = None):
    half = precision == "half"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model = model.half() if half else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dtype = torch.float16 if half else torch.float32
    x, y = torch.randn(256, 16).to(dtype), torch.randn(256, 1).to(dtype)
    scale = 1e-4 if lr_times is None else 1.0

    def loss_of(m, x, y):
        out = m(x)
        return out, scale * (out.float() - y.float()).pow(2).mean()

    def after(step):
        with torch.no_grad():
            model[2].weight.mul_(grow)
        if lr_times is not None and step == 30:
            opt.param_groups[0]["lr"] *= lr_times

    return _train(model, opt, half, None if half else torch.float16, lambda s: (x, y), loss_of, after, 80)


def hf(name: str, precision: str, grow: float = 1.0, lr: Optional[float] = None, steps: int = 60):
    model = _hf(name)
    half = precision == "half"
    model = model.half() if half else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4 if half else 1e-8)
    g = torch.Generator().manual_seed(1)

    def batch(step):
        ids = torch.randint(0, 100, (8, 16), generator=g)
        mask = torch.ones(8, 16, dtype=torch.long)
        mask[:, 12:] = 0
        return ids, mask

    def loss_of(m, ids, mask):
        out = m(input_ids=ids, attention_mask=mask, labels=ids)
        return out.logits, out.loss

    def after(step):
        if grow != 1.0:
            with torch.no_grad():
                model.transformer.h[0].mlp.c_proj.weight.mul_(grow)
        if lr is not None and step == 10:
            for group in opt.param_groups:
                group["lr"] = lr

    autocast = None if half else {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    return _train(model, opt, half, autocast, batch, loss_of, after, steps)


def main() -> int:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rows = []
    planted = [(f"mlp grow {g}x", p, lambda p=p, g=g: mlp(p, grow=g)) for g in (1.3, 2.0, 4.0)
               for p in ("half", "autocast")]
    planted += [(f"mlp lr x{k}", p, lambda p=p, k=k: mlp(p, lr_times=k)) for k in (300, 1000)
                for p in ("half", "autocast")]
    planted += [(f"gpt2 grow {g}x", p, lambda p=p, g=g: hf("gpt2", "half" if p == "half" else "fp16", grow=g))
                for g in (1.5, 2.0) for p in ("half", "autocast")]
    planted += [("gpt2 lr 1.0", p, lambda p=p: hf("gpt2", "half" if p == "half" else "fp16", lr=1.0))
                for p in ("half", "autocast")]
    for name, precision, run in planted:
        overflow, monitor = run()
        alerts = monitor.headroom_alerts
        first = alerts[0] if alerts else None
        lead = overflow - first.step if first is not None and overflow is not None and first.step < overflow else 0
        rows.append([name, precision, str(overflow), str(first.step) if first else "-", str(lead),
                     f"{first.reason} {first.kind} `{first.module}`" if first else ""])
    print("planted float16 overflows (lead: steps from the first warning to the overflow)")
    print_table(rows, ["run", "float16", "overflow", "warned", "lead", "first warning"])

    rows = []
    for name in ("gpt2", "bert"):
        for precision in ("fp16", "bf16", "half"):
            overflow, monitor = hf(name, precision, steps=30)
            rows.append([name, precision, "none" if overflow is None else str(overflow),
                         str(len(monitor.headroom._series)), str(len(monitor.headroom_alerts))])
    print()
    print("healthy runs (30 AdamW steps): every warning is a false alarm")
    print_table(rows, ["model", "precision", "overflow", "tensors watched", "warnings"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
