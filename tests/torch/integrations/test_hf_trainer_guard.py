"""The HF Trainer: checked before its clip, a skip leaves the model and Adam bitwise untouched,
the LR schedule holds as for the Trainer's own AMP skip, and the logs carry the counters."""

from __future__ import annotations

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
from accelerate.state import AcceleratorState, GradientState  # noqa: E402

from nanguard.torch.integrations.hf import TrainerGuard, guard_trainer  # noqa: E402
from integration_helpers import assert_bitwise, make_net, nan  # noqa: E402

GA = 2
BATCH = 4


@pytest.fixture(autouse=True)
def quiet_and_fresh():
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    transformers.logging.set_verbosity_error()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


class Regressor(torch.nn.Module):
    """The sqrt model with the loss inside, as the Trainer wants it."""

    def __init__(self) -> None:
        super().__init__()
        self.net = make_net()

    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.net(x), labels)}


class Samples(torch.utils.data.IterableDataset):
    """A fixed order (no sampler shuffles an IterableDataset); sample `zero_at` has a zero
    input row (finite loss, NaN gradient), sample `nan_at` a NaN input (NaN loss)."""

    def __init__(self, n, zero_at=(), nan_at=(), make=None):
        self.n, self.zero_at, self.nan_at = n, set(zero_at), set(nan_at)
        self.make = make

    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for i in range(self.n):
            item = self.make(i, g) if self.make else {"x": torch.randn(4, generator=g),
                                                      "labels": torch.randn(1, generator=g)}
            key = "x" if "x" in item else "inputs_embeds"
            if i in self.zero_at:
                item[key] = torch.zeros_like(item[key])
            if i in self.nan_at:
                item[key] = item[key].clone()
                item[key].view(-1)[1] = nan
            yield item


class Recorder(transformers.TrainerCallback):
    """Per optimizer step: parameters and optimizer state before and after, and the LR."""

    def __init__(self) -> None:
        self.before, self.after, self.lrs = [], [], []

    def _snap(self, model, optimizer):
        return {"params": [p.detach().clone() for p in model.parameters()],
                "state": copy.deepcopy(optimizer.state_dict())}

    def on_step_begin(self, args, state, control, model=None, optimizer=None, **kw):
        self.before.append(self._snap(model, optimizer))

    def on_step_end(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kw):
        self.after.append(self._snap(model, optimizer))
        self.lrs.append(lr_scheduler.get_last_lr()[0])


def make_trainer(tmp_path, data, model=None, guarded=True, steps=4, max_grad_norm=1.0,
                 args_kw=None, **guard_kw):
    args = transformers.TrainingArguments(**{
        "max_grad_norm": max_grad_norm,
        "output_dir": str(tmp_path), "per_device_train_batch_size": BATCH,
        "gradient_accumulation_steps": GA, "max_steps": steps, "learning_rate": 1e-2,
        "lr_scheduler_type": "linear", "logging_steps": 1, "report_to": [], "save_strategy": "no",
        "use_cpu": True, "disable_tqdm": True, "seed": 0, "dataloader_num_workers": 0,
        **(args_kw or {})})
    recorder = Recorder()
    trainer = transformers.Trainer(model=model or Regressor(), args=args, train_dataset=data,
                                   callbacks=[recorder])
    guard = guard_trainer(trainer, **guard_kw) if guarded else None
    return trainer, guard, recorder


def bad_step_samples(step: int, micro: int = 1, row: int = 0) -> int:
    """The sample index that lands in (optimizer step `step`, micro-batch `micro`), 0-based."""
    return (step * GA + micro) * BATCH + row


def test_the_planted_bug_kills_an_unguarded_run(tmp_path):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    trainer, _, _ = make_trainer(tmp_path, data, guarded=False)
    trainer.train()
    assert not all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_a_bad_gradient_is_skipped_before_the_clip_poisons_it(tmp_path):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    trainer, guard, rec = make_trainer(tmp_path, data)
    trainer.train()
    r = guard.records
    assert trainer.state.global_step == r.steps == 4  # counted as the Trainer counts
    assert (r.applied, r.skipped) == (3, 1) and r.bad_steps == [2]
    (event,) = r.events
    # checked before max_grad_norm=1.0 clipped: only the parameter that really was NaN
    assert [p.name for p in event.params] == ["net.embed.weight"]
    assert_bitwise(rec.after[1], rec.before[1])  # the skipped step changed nothing at all
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    # linear decay over 4 steps: the schedule holds on the skip, as after the Trainer's own
    # AMP overflow skip (it steps the scheduler only if the step was not skipped)
    assert rec.lrs == pytest.approx([7.5e-3, 7.5e-3, 5e-3, 2.5e-3])
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["nanguard_skipped_steps"] for h in logged] == [0, 1, 1, 1]


def test_policy_zero_zeroes_only_the_bad_elements_and_the_schedule_moves(tmp_path):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    trainer, guard, rec = make_trainer(tmp_path, data, policy="zero")
    trainer.train()
    (event,) = guard.records.events
    assert event.action == "zeroed" and [p.name for p in event.params] == ["net.embed.weight"]
    before, after = rec.before[1]["params"], rec.after[1]["params"]
    assert all(not torch.equal(a, b) for a, b in zip(before, after))  # every parameter moved
    assert rec.lrs == pytest.approx([7.5e-3, 5e-3, 2.5e-3, 0.0])


def tiny_gpt2():
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                     n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def gpt2_item(i, g):
    return {"inputs_embeds": 0.1 * torch.randn(8, 32, generator=g),
            "labels": torch.randint(0, 64, (8,), generator=g)}


@pytest.mark.parametrize("accumulation", ["skip_window", "drop"])
def test_gpt2_with_a_nan_loss_micro_batch(tmp_path, accumulation):
    data = Samples(4 * GA * BATCH, nan_at=[bad_step_samples(2, micro=0)], make=gpt2_item)
    trainer, guard, rec = make_trainer(tmp_path, data, model=tiny_gpt2(),
                                       accumulation=accumulation)
    trainer.train()
    r = guard.records
    assert r.steps == trainer.state.global_step == 4 and r.nonfinite_losses == 1
    (event,) = r.events
    assert (event.kind, event.step, event.micro_batches, event.window) == ("loss", 3, (1,), GA)
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    if accumulation == "skip_window":
        assert (r.skipped, event.action) == (1, "skipped")
        assert_bitwise(rec.after[2], rec.before[2])
        assert rec.lrs[2] == rec.lrs[1]
    else:
        assert (r.skipped, r.dropped_micro_batches, event.action) == (0, 1, "dropped")
        assert rec.lrs[2] < rec.lrs[1]
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged[-1]["nanguard_nonfinite_losses"] == 1


def test_fp16_with_the_trainers_grad_scaler(tmp_path):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    trainer, guard, rec = make_trainer(tmp_path, data)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    trainer.accelerator.scaler = scaler  # the CPU stand-in for fp16=True on a GPU
    trainer.train()
    assert guard.records.skipped == 1 and guard.records.events[0].scale == 2.0 ** 10
    assert scaler.get_scale() == 2.0 ** 9
    assert_bitwise(rec.after[1], rec.before[1])
    assert rec.lrs == pytest.approx([7.5e-3, 7.5e-3, 5e-3, 2.5e-3])


def test_arguments_are_checked_before_training(tmp_path):
    data = Samples(8)
    trainer, guard, _ = make_trainer(tmp_path, data)
    assert isinstance(trainer.callback_handler.callbacks[0], TrainerGuard)
    with pytest.raises(ValueError, match="already guarded"):
        guard_trainer(trainer)
    with pytest.raises(RuntimeError, match="has not started training"):
        guard.records
    with pytest.raises(TypeError, match="must be a transformers.Trainer"):
        guard_trainer(object())
    trainer2, _, _ = make_trainer(tmp_path, data, guarded=False)
    with pytest.raises(ValueError, match="unknown policy"):
        guard_trainer(trainer2, policy="ignore")


@pytest.mark.slow
def test_a_healthy_guarded_run_is_the_unguarded_run_bit_for_bit(tmp_path):
    # the Trainer's AdamW has two param groups (decay / no decay), so its parameter order is
    # not the model's; the guarded clip must still add the norms up as torch's does
    runs = []
    for guarded in (False, True):
        data = Samples(8 * GA * BATCH, make=gpt2_item)
        trainer, _, rec = make_trainer(tmp_path / str(guarded), data, model=tiny_gpt2(),
                                       guarded=guarded, steps=8, max_grad_norm=0.1)
        trainer.train()
        runs.append(rec.after)
    assert len(trainer.optimizer.param_groups) == 2
    assert_bitwise(runs[1], runs[0])


def test_the_guard_state_is_saved_with_the_trainer_checkpoint(tmp_path):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    saving = {"save_strategy": "steps", "save_steps": 4}
    trainer, guard, _ = make_trainer(tmp_path, data, args_kw=saving)
    trainer.train()
    assert guard.records.bad_steps == [2]
    # a new Trainer, guarded the same way, resumes from the checkpoint and goes on to step 6
    trainer2, guard2, _ = make_trainer(tmp_path, Samples(6 * GA * BATCH), steps=6, args_kw=saving)
    trainer2.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    r = guard2.records
    assert (r.steps, r.applied, r.skipped, r.bad_steps) == (6, 5, 1, [2])
    logged = [h for h in trainer2.state.log_history if "loss" in h]
    assert logged[-1]["nanguard_skipped_steps"] == 1  # not back to 0


def test_the_end_of_train_prints_one_line_and_the_guard_plots(tmp_path, capsys):
    data = Samples(4 * GA * BATCH, zero_at=[bad_step_samples(1)])
    trainer, guard, _ = make_trainer(tmp_path, data)
    trainer.train()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("nanguard")]
    assert lines == ["nanguard GradGuard (policy 'skip'): 4 steps, 3 applied, 1 skipped, 0 zeroed; "
                     "non-finite gradients in net.embed.weight"]
    pytest.importorskip("matplotlib")
    fig = guard.plot(str(tmp_path / "g.png"))
    assert "non-finite step" in [line.get_label() for line in fig.axes[0].get_lines()]


def test_rollback_restores_the_snapshot_and_the_schedule_inside_the_trainer(tmp_path):
    # snapshots before the updates of steps 0 and 2 (every 2nd applied step); step 3's NaN
    # gradient brings back the state step 2 started from, the Trainer's scheduler included
    data = Samples(6 * GA * BATCH, zero_at=[bad_step_samples(3)])
    trainer, guard, rec = make_trainer(tmp_path, data, steps=6, policy="rollback",
                                       snapshot_every=2, lr_backoff=0.5)
    trainer.train()
    r = guard.records
    assert trainer.state.global_step == r.steps == 6
    assert (r.applied, r.skipped, r.rolled_back, r.steps_undone) == (5, 0, 1, 1)
    (event,) = r.events
    assert (event.step, event.action, event.steps_undone, event.lr_scale) == (
        4, "rolled back", 1, 0.5)
    assert [p.name for p in event.params] == ["net.embed.weight"]
    assert_bitwise(rec.after[3], rec.before[2])  # parameters, Adam's moments and steps, lr
    # linear decay over 6 steps; the rollback restored the scheduler to before step 2's
    # update and the Trainer held it (a rolled-back step is reported as skipped)
    assert rec.lrs == pytest.approx([1e-2 * (6 - k) / 6 for k in (1, 2, 3, 2, 3, 4)])
    assert guard.guard.lr_scale == 0.5
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    saved = trainer.state.stateful_callbacks["nanguard"]
    assert saved["rolled_back"] == 1 and saved["events"][0]["action"] == "rolled back"


def test_rollback_arguments_are_checked_before_training(tmp_path):
    data = Samples(4 * GA * BATCH)
    with pytest.raises(ValueError, match="`snapshot_every` belongs to policy='rollback'"):
        make_trainer(tmp_path, data, snapshot_every=2)
    with pytest.raises(ValueError, match="needs accumulation='skip_window'"):
        make_trainer(tmp_path, data, policy="rollback", accumulation="drop")
