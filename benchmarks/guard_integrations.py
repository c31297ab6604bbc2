"""Overhead of the framework integrations against each framework's own loop (same run).

For accelerate, the HF Trainer and PyTorch Lightning, the same training run is timed with
and without nanguard's guard (as a user adds it: defaults, logging on), alternating guarded
and plain runs. Each run measures its steady state: the time per optimizer step from step
`--skip` to the last (a callback or the loop reads the clock at the end of each step), so the
frameworks' set-up is not counted. 2 micro-batches of 16x32x128 per optimizer step, gradient
clipping at 1.0, AdamW, 1 thread, two models:

- large: the shared benchmark transformer (4-layer encoder, d_model 128), tens of ms a step;
- small: a 2-layer MLP (128 -> 64 -> 1) on the same batches, about 1 ms a step, where the
  guard's fixed cost per step (and a framework hook's) shows; issue 31 found Lightning's
  per-step logging at 1.56x there.

Goal (issue 13): each integration <= 1.03x its framework's own loop on the large step.

    .venv/bin/python benchmarks/guard_integrations.py [--rounds 9] [--steps 30] [--sizes small,large]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from benchmarks.common import print_table, single_thread  # noqa: E402

GOAL = 1.03
ACCUM = 2


SIZES = ("small", "large")


class Net(torch.nn.Module):
    """The benchmark model of `size` with its loss inside (as the HF Trainer wants it)."""

    def __init__(self, size: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        if size == "large":  # the shared benchmark transformer
            layer = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                                     batch_first=True)
            self.encoder: torch.nn.Module = torch.nn.TransformerEncoder(
                layer, 4, enable_nested_tensor=False)
            self.head = torch.nn.Linear(128, 1)
        else:
            self.encoder = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.Tanh())
            self.head = torch.nn.Linear(64, 1)

    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.head(self.encoder(x)), labels)}


def samples(n: int):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(32, 128, generator=g), "labels": torch.randn(32, 1, generator=g)}
            for _ in range(n)]


def steady(stamps: list, skip: int) -> float:
    return (stamps[-1] - stamps[skip]) / (len(stamps) - 1 - skip)


def run_accelerate(guarded: bool, size: str, steps: int, skip: int) -> float:
    import accelerate
    from accelerate.state import AcceleratorState, GradientState

    from nanguard.torch.integrations.accelerate import guard_accelerator

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model = Net(size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(samples(16 * ACCUM * steps), batch_size=16)
    model, opt, data = accelerator.prepare(model, opt, data)
    if guarded:
        guard_accelerator(accelerator, opt, model=model, summary=False)
    stamps = []
    for batch in data:
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch)["loss"])
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        if accelerator.sync_gradients:
            stamps.append(time.perf_counter())
    return steady(stamps, skip)


def run_hf(guarded: bool, size: str, steps: int, skip: int) -> float:
    import tempfile

    import transformers
    from accelerate.state import AcceleratorState, GradientState

    from nanguard.torch.integrations.hf import guard_trainer

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    stamps = []

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=16, gradient_accumulation_steps=ACCUM,
            max_steps=steps, learning_rate=1e-4, max_grad_norm=1.0, logging_steps=10,
            report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            dataloader_num_workers=0)
        trainer = transformers.Trainer(model=Net(size), args=args,
                                       train_dataset=samples(16 * ACCUM * steps),
                                       callbacks=[Clock()])
        if guarded:
            guard_trainer(trainer, summary=False)
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its log lines
            trainer.train()
    return steady(stamps, skip)


def run_lightning(guarded: bool, size: str, steps: int, skip: int) -> float:
    import pytorch_lightning as pl

    from nanguard.torch.integrations.lightning import GuardCallback

    stamps = []

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net(size)

        def training_step(self, batch, batch_idx):
            return self.net(**batch)["loss"]

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Clock(pl.Callback):
        def on_before_zero_grad(self, trainer, module, optimizer):
            stamps.append(time.perf_counter())

    data = torch.utils.data.DataLoader(samples(16 * ACCUM * (steps + 1)), batch_size=16)
    callbacks = [Clock()] + ([GuardCallback(summary=False)] if guarded else [])
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, gradient_clip_val=1.0,
                         accumulate_grad_batches=ACCUM, callbacks=callbacks)
    trainer.fit(Module(), data)
    return steady(stamps, skip)


FRAMEWORKS = {"accelerate": run_accelerate, "HF Trainer": run_hf, "Lightning": run_lightning}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=5, help="steps not timed (warm-up)")
    parser.add_argument("--sizes", default=",".join(SIZES),
                        help="comma-separated models to time: small, large")
    args = parser.parse_args(argv)
    sizes = [x for x in args.sizes.split(",") if x]
    if not sizes or any(x not in SIZES for x in sizes):
        parser.error(f"--sizes: choose from {', '.join(SIZES)}")
    single_thread()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    rows = []
    for name, run in FRAMEWORKS.items():
        try:
            run(False, sizes[0], args.skip + 3, 1)  # imports and first-use costs out of the rounds
        except ImportError as error:
            rows.append([name, "-", "-", "-", "-", f"skipped: {error}"])
            continue
        for size in sizes:
            plain, guarded, ratios = [], [], []
            for r in range(args.rounds):
                order = (False, True) if r % 2 == 0 else (True, False)
                times = {g: run(g, size, args.steps, args.skip) for g in order}
                plain.append(times[False])
                guarded.append(times[True])
                ratios.append(times[True] / times[False])
            ratio = statistics.median(ratios)
            verdict = ("ok" if ratio <= GOAL else "OVER") if size == "large" else ""
            rows.append([name, size, f"{statistics.median(plain) * 1e3:.2f}",
                         f"{statistics.median(guarded) * 1e3:.2f}", f"{ratio:.3f}", verdict])
    print(f"optimizer steps, {ACCUM} micro-batches of 16x32x128 each, clip 1.0, AdamW, 1 thread; "
          f"median of {args.rounds} alternating runs of {args.steps} steps (first {args.skip} not "
          f"timed); goal <= {GOAL}x on the large step")
    print_table(rows, ["framework", "model", "own loop ms/step", "guarded ms/step", "ratio", ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
