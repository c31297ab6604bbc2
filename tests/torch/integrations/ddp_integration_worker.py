"""One rank of a 2-process CPU (gloo) run of accelerate, the HF Trainer or Lightning, guarded.

Launched by test_integrations_ddp.py with the environment a launcher (torchrun) would set:
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Each framework initialises its own
process group from it. Rank 1's model turns its loss NaN at one planted forward call, the
last micro-batch of an accumulation window, the one whose backward all-reduces under DDP:
a rank that skipped that backward alone would leave the other waiting in the all-reduce.

    python ddp_integration_worker.py {accelerate|hf|lightning}[-rollback] OUT.json

With "-rollback" the guard's policy is "rollback" with a snapshot before every update, so the
planted step brings both ranks back to the state before step 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback
import warnings

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from integration_helpers import SqrtNet, data  # noqa: E402
from tests.shared import leave  # noqa: E402

RANK = int(os.environ["RANK"])
ACCUM = 2
STEPS = 3
PLANT_RANK, PLANT_CALL = 1, 4  # window 2's last micro-batch (forward calls count from 1)
ROLLBACK = dict(policy="rollback", snapshot_every=1)
POLICY: dict = {}  # the guard's policy arguments: {} (skip) or ROLLBACK, set by main()


class Planted(torch.nn.Module):
    """SqrtNet whose loss is NaN at forward call PLANT_CALL on rank PLANT_RANK only."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)  # every rank starts from the same weights
        self.net = SqrtNet()
        self.calls = 0

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
        self.calls += 1
        loss = torch.nn.functional.mse_loss(self.net(x), labels)
        if RANK == PLANT_RANK and self.calls == PLANT_CALL:
            loss = loss * float("nan")
        return {"loss": loss}


def digest(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().contiguous().view(torch.int32).numpy().tobytes())
    return h.hexdigest()[:16]


def records_of(owner) -> dict:
    r = owner.records
    return {"steps": r.steps, "applied": r.applied, "skipped": r.skipped,
            "nonfinite_losses": r.nonfinite_losses, "rolled_back": r.rolled_back,
            "events": [{"step": e.step, "kind": e.kind} for e in r.events],
            "actions": [e.action for e in r.events],
            "line": r.line(), "summary": r.summary()}


def samples(n: int) -> list:
    out = []
    for i in range(n):
        x, y = data(1000 * RANK + i, n=4)
        out.append({"x": x, "labels": y})
    return out


def run_accelerate() -> dict:
    import accelerate

    from nanguard.torch.integrations.accelerate import guard_accelerator

    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model = Planted()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model, opt, sched = accelerator.prepare(model, opt, sched)
    guard = guard_accelerator(accelerator, opt, model=model, **POLICY,
                              **(dict(scheduler=sched) if POLICY else {}))
    lrs, digests = [], []
    for batch in samples(ACCUM * STEPS):  # each rank its own data, as a sharded loader gives
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch)["loss"])
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
        if accelerator.sync_gradients:
            lrs.append(opt.param_groups[0]["lr"])
            digests.append(digest(model))
    return {"kind": accelerator.distributed_type.name, "lrs": lrs, "digests": digests,
            **records_of(guard)}


def run_hf() -> dict:
    import tempfile

    import transformers

    from nanguard.torch.integrations.hf import guard_trainer

    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=4, gradient_accumulation_steps=ACCUM,
            max_steps=STEPS, learning_rate=1e-2, max_grad_norm=1.0, logging_steps=1,
            report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            dataloader_num_workers=0, ddp_backend="gloo")
        dataset = [dict(x=x, labels=y) for s in samples(ACCUM * STEPS * 2)
                   for x, y in zip(s["x"], s["labels"])]
        trainer = transformers.Trainer(model=Planted(), args=args, train_dataset=dataset)
        nan_guard = guard_trainer(trainer, **POLICY)
        trainer.train()
        lrs = [e["learning_rate"] for e in trainer.state.log_history if "learning_rate" in e]
        return {"kind": trainer.accelerator.distributed_type.name, "lrs": lrs,
                "digests": [digest(trainer.model)], "global_step": trainer.state.global_step,
                "skipped_logged": [e.get("nanguard_skipped_steps")
                                   for e in trainer.state.log_history if "loss" in e],
                **records_of(nan_guard)}


def run_lightning() -> dict:
    import pytorch_lightning as pl

    from nanguard.torch.integrations.lightning import GuardCallback

    lrs, digests = [], []

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = Planted()

        def training_step(self, batch, batch_idx):
            return self.model(**batch)["loss"]

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

        def on_train_batch_end(self, outputs, batch, batch_idx):
            if (batch_idx + 1) % ACCUM == 0:
                lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
                digests.append(digest(self))

    class Shards(torch.utils.data.Dataset):  # this rank's own batches, in order
        def __init__(self) -> None:
            self.items = samples(ACCUM * STEPS)

        def __len__(self) -> int:
            return len(self.items)

        def __getitem__(self, i: int) -> dict:
            return self.items[i]

    loader = torch.utils.data.DataLoader(Shards(), batch_size=None)
    guard = GuardCallback(**POLICY)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=2, strategy="ddp",
                         accumulate_grad_batches=ACCUM, gradient_clip_val=1.0, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False,
                         callbacks=[guard])
    trainer.fit(Module(), loader)
    return {"kind": type(trainer.strategy).__name__, "lrs": lrs, "digests": digests,
            "global_step": trainer.global_step, **records_of(guard)}


def main() -> int:
    framework, rollback, out_path = sys.argv[1].partition("-")[0], "-" in sys.argv[1], sys.argv[2]
    POLICY.update(ROLLBACK if rollback else {})
    warnings.filterwarnings("ignore")
    try:
        result = {"accelerate": run_accelerate, "hf": run_hf, "lightning": run_lightning}[framework]()
        result["world"] = dist.get_world_size() if dist.is_initialized() else 1
        with open(out_path, "w") as f:
            json.dump(result, f)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    leave(main())
