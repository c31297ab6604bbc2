"""Overhead of the framework integrations against each framework's own loop (same run).

For accelerate, the HF Trainer and PyTorch Lightning, the same training run is timed with
and without nanguard's guard, alternating guarded and plain runs. Each run measures its
steady state: the time per optimizer step from step `--skip` to the last (a callback or the
loop reads the clock at the end of each step), so the frameworks' set-up is not counted.
The model is the shared benchmark transformer (4-layer encoder, d_model 128, batch 16x32),
2 micro-batches per optimizer step, gradient clipping at 1.0, AdamW, 1 thread.

Goal (issue 13): each integration <= 1.03x its framework's own loop.

    .venv/bin/python benchmarks/guard_integrations.py [--rounds 9] [--steps 30]
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


class Net(torch.nn.Module):
    """The shared benchmark transformer with its loss inside (as the HF Trainer wants it)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = torch.nn.Linear(128, 1)

    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.head(self.encoder(x)), labels)}


def samples(n: int):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(32, 128, generator=g), "labels": torch.randn(32, 1, generator=g)}
            for _ in range(n)]


def steady(stamps: list, skip: int) -> float:
    return (stamps[-1] - stamps[skip]) / (len(stamps) - 1 - skip)


def run_accelerate(guarded: bool, steps: int, skip: int) -> float:
    import accelerate
    from accelerate.state import AcceleratorState, GradientState

    from nanguard.torch.integrations.accelerate import guard_accelerator

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(samples(16 * ACCUM * steps), batch_size=16)
    model, opt, data = accelerator.prepare(model, opt, data)
    if guarded:
        guard_accelerator(accelerator, opt, model=model)
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


def run_hf(guarded: bool, steps: int, skip: int) -> float:
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
        trainer = transformers.Trainer(model=Net(), args=args,
                                       train_dataset=samples(16 * ACCUM * steps),
                                       callbacks=[Clock()])
        if guarded:
            guard_trainer(trainer)
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its log lines
            trainer.train()
    return steady(stamps, skip)


def run_lightning(guarded: bool, steps: int, skip: int) -> float:
    import pytorch_lightning as pl

    from nanguard.torch.integrations.lightning import GuardCallback

    stamps = []

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()

        def training_step(self, batch, batch_idx):
            return self.net(**batch)["loss"]

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Clock(pl.Callback):
        def on_before_zero_grad(self, trainer, module, optimizer):
            stamps.append(time.perf_counter())

    data = torch.utils.data.DataLoader(samples(16 * ACCUM * (steps + 1)), batch_size=16)
    callbacks = [Clock()] + ([GuardCallback(log=False)] if guarded else [])
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
    args = parser.parse_args(argv)
    single_thread()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    rows = []
    for name, run in FRAMEWORKS.items():
        try:
            run(False, args.skip + 3, 1)  # imports and first-use costs out of the rounds
        except ImportError as error:
            rows.append([name, "-", "-", "-", f"skipped: {error}"])
            continue
        plain, guarded, ratios = [], [], []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            times = {g: run(g, args.steps, args.skip) for g in order}
            plain.append(times[False])
            guarded.append(times[True])
            ratios.append(times[True] / times[False])
        ratio = statistics.median(ratios)
        rows.append([name, f"{statistics.median(plain) * 1e3:.1f}",
                     f"{statistics.median(guarded) * 1e3:.1f}", f"{ratio:.3f}",
                     "ok" if ratio <= GOAL else "OVER"])
    print(f"optimizer steps of the benchmark transformer, {ACCUM} micro-batches of 16x32 each, "
          f"clip 1.0, AdamW, 1 thread; median of {args.rounds} alternating runs of "
          f"{args.steps} steps (first {args.skip} not timed); goal <= {GOAL}x")
    print_table(rows, ["framework", "own loop ms/step", "guarded ms/step", "ratio", ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
