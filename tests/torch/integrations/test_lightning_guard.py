"""PyTorch Lightning: the callback keeps Lightning's loop, hooks, clipping and step counting;
a skipped step is bitwise invisible, counted as a step, not clipped, and holds the schedule."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")
from pytorch_lightning.plugins.precision import MixedPrecision  # noqa: E402

import nanguard  # noqa: E402
from nanguard.torch.integrations.lightning import GuardCallback  # noqa: E402
from integration_helpers import assert_bitwise, make_net, nan  # noqa: E402

BATCH = 4


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
        warnings.filterwarnings("ignore", message=".*LightningModule.log.*")
        yield


def loader(n_batches, zero_rows=(), nan_batches=()):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n_batches * BATCH, 4, generator=g), torch.randn(n_batches * BATCH, 1, generator=g)
    for b in zero_rows:
        x[b * BATCH] = 0.0  # finite loss, NaN gradient in net.embed.weight
    for b in nan_batches:
        x[b * BATCH + 1, 2] = nan  # NaN loss
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)


class Module(pl.LightningModule):
    def __init__(self, manual: bool = False, opt: str = "adam") -> None:
        super().__init__()
        self.net = make_net()
        self.automatic_optimization = not manual
        self.opt = opt
        self.hook_calls = 0
        self.clip_calls = 0
        self.norms_after_clip = []
        self.nan_guard = None

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.automatic_optimization:
            return loss
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        if self.nan_guard is None or self.nan_guard.last_step_applied():
            self.lr_schedulers().step()
        return None

    def on_before_optimizer_step(self, optimizer):
        self.hook_calls += 1

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        self.clip_calls += 1
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_before_zero_grad(self, optimizer):
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if grads:
            self.norms_after_clip.append(float(torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g) for g in grads]))))

    def configure_optimizers(self):
        opt = (torch.optim.Adam(self.parameters(), lr=1e-2) if self.opt == "adam"
               else torch.optim.SGD(self.parameters(), lr=0.1))
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class Recorder(pl.Callback):
    def __init__(self) -> None:
        self.before, self.after, self.lrs = [], [], []

    def _snap(self, trainer, module):
        opt = trainer.optimizers[0]
        return {"params": [p.detach().clone() for p in module.parameters()],
                "state": copy.deepcopy(opt.state_dict())}

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.before.append(self._snap(trainer, module))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.after.append(self._snap(trainer, module))
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


def fit(module, data, guard=True, max_steps=5, ckpt_path=None, **trainer_kw):
    recorder = Recorder()
    callback = guard if isinstance(guard, GuardCallback) else (GuardCallback() if guard else None)
    module.nan_guard = callback
    callbacks = [recorder] + ([callback] if callback else [])
    trainer = pl.Trainer(max_steps=max_steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks, **trainer_kw)
    trainer.fit(module, data, ckpt_path=ckpt_path)
    return trainer, callback, recorder


def test_the_planted_bug_kills_an_unguarded_run():
    module = Module()
    fit(module, loader(5, zero_rows=[2]), guard=False, gradient_clip_val=1.0)
    assert not all(torch.isfinite(p).all() for p in module.parameters())


def test_automatic_optimization_skip_keeps_hooks_clipping_and_step_counting():
    module = Module()
    trainer, guard, rec = fit(module, loader(5, zero_rows=[2]), gradient_clip_val=0.5)
    r = guard.records
    assert trainer.global_step == r.steps == 5 and (r.applied, r.skipped) == (4, 1)
    assert [p.name for p in r.events[0].params] == ["net.embed.weight"]
    assert_bitwise(rec.after[2], rec.before[2])  # the skipped step changed nothing
    assert module.hook_calls == 5  # the user's on_before_optimizer_step still runs
    assert module.clip_calls == 4  # clipping still runs, except on the skipped step
    good = [n for i, n in enumerate(module.norms_after_clip)]
    assert all(n <= 0.5 * (1 + 1e-5) for n in good[:2] + good[3:])
    assert rec.lrs == pytest.approx([5e-3, 2.5e-3, 2.5e-3, 1.25e-3, 6.25e-4])  # held
    assert all(torch.isfinite(p).all() for p in module.parameters())
    assert trainer.callback_metrics["nanguard_skipped_steps"] == 1.0


def test_hold_schedule_false_keeps_lightnings_own_behaviour():
    trainer, guard, rec = fit(Module(), loader(5, zero_rows=[2]),
                              guard=GuardCallback(hold_schedule=False))
    assert rec.lrs == pytest.approx([0.01 * 0.5 ** k for k in range(1, 6)])


def test_policy_zero_zeroes_before_lightning_clips():
    module = Module(opt="sgd")
    trainer, guard, rec = fit(module, loader(5, zero_rows=[2]), guard=GuardCallback("zero"),
                              gradient_clip_val=0.5)
    assert guard.records.zeroed == 1 and module.clip_calls == 5
    assert all(torch.isfinite(p).all() for p in module.parameters())
    assert module.norms_after_clip[2] <= 0.5 * (1 + 1e-5)


def test_accumulation_counts_optimizer_steps_and_a_nan_loss_skips_its_window():
    module = Module()
    trainer, guard, rec = fit(module, loader(8, nan_batches=[3]), accumulate_grad_batches=2,
                              max_steps=4)
    r = guard.records
    assert trainer.global_step == r.steps == 4 and r.skipped == 1
    (event,) = r.events
    assert (event.kind, event.step, event.micro_batches, event.window) == ("loss", 2, (2,), 2)
    assert_bitwise(rec.after[3], rec.before[2])  # window of batches 2 and 3: no change


def test_manual_optimization_ends_at_max_steps():
    module = Module(manual=True)
    trainer, guard, rec = fit(module, loader(6, zero_rows=[1], nan_batches=[3]), max_steps=6)
    r = guard.records
    assert trainer.global_step == r.steps == 6  # it used to freeze, and the run never ended
    assert (r.applied, r.skipped) == (4, 2)
    assert_bitwise(rec.after[1], rec.before[1])
    assert_bitwise(rec.after[3], rec.before[3])
    assert all(torch.isfinite(p).all() for p in module.parameters())
    assert rec.lrs == pytest.approx([5e-3, 5e-3, 2.5e-3, 2.5e-3, 1.25e-3, 6.25e-4])


def test_16_mixed_through_a_cpu_grad_scaler():
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    module = Module()
    trainer, guard, rec = fit(module, loader(5, zero_rows=[2]), gradient_clip_val=1.0,
                              plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)])
    r = guard.records
    assert trainer.global_step == r.steps == 5 and r.skipped == 1
    assert r.events[0].scale == 2.0 ** 10 and scaler.get_scale() == 2.0 ** 9
    assert_bitwise(rec.after[2], rec.before[2])
    assert all(torch.isfinite(p).all() for p in module.parameters())
    before = [p.detach().clone() for p in rec.before[0]["params"]]
    assert any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


def test_bf16_mixed_and_raise():
    module = Module()
    trainer, guard, rec = fit(module, loader(5, zero_rows=[2]), precision="bf16-mixed")
    assert guard.records.skipped == 1 and trainer.global_step == 5
    with pytest.raises(nanguard.NonFiniteError, match="net.embed.weight"):
        fit(Module(), loader(5, zero_rows=[2]), guard=GuardCallback("raise"))


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown policy"):
        GuardCallback("ignore")
    with pytest.raises(TypeError, match="`hold_schedule` must be a bool"):
        GuardCallback(hold_schedule="yes")
    with pytest.raises(RuntimeError, match="fit\\(\\) has not started"):
        GuardCallback().records
    with pytest.raises(ValueError, match="policy 'zero' cannot be used with precision '16-mixed'"):
        fit(Module(), loader(2), guard=GuardCallback("zero"),
            plugins=[MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))])


class Logged(Module):
    """Counts the callback's self.log calls (each costs about 0.3 ms in Lightning)."""

    def __init__(self) -> None:
        super().__init__()
        self.nanguard_logs = []

    def log(self, name, value, *args, **kwargs):
        if name.startswith("nanguard"):
            self.nanguard_logs.append((self.global_step, name, value))
        return super().log(name, value, *args, **kwargs)


def test_log_false_is_honoured_and_counters_are_logged_only_when_they_change():
    # issue 31: Lightning sets callback.log = module.log at fit start, so log=False was
    # ignored, and logging every step was the whole overhead on a small model
    module = Logged()
    trainer, guard, _ = fit(module, loader(6, zero_rows=[2]), guard=GuardCallback(log=False),
                            max_steps=6)
    assert module.nanguard_logs == [] and "nanguard_skipped_steps" not in trainer.callback_metrics
    module = Logged()
    trainer, guard, _ = fit(module, loader(6, zero_rows=[2]), max_steps=6)
    assert [(s, v) for s, n, v in module.nanguard_logs if n == "nanguard_skipped_steps"] == [
        (1, 0.0), (3, 1.0)]  # the first step, then the step that skipped
    assert trainer.callback_metrics["nanguard_skipped_steps"] == 1.0
    assert trainer.progress_bar_metrics["nanguard_skipped_steps"] == 1.0


def test_the_guard_state_is_saved_in_lightning_checkpoints(tmp_path):
    module = Module()
    trainer, guard, _ = fit(module, loader(4, zero_rows=[1, 2]), max_steps=4)
    path = tmp_path / "last.ckpt"
    trainer.save_checkpoint(path)
    resumed = Logged()
    trainer2, guard2, _ = fit(resumed, loader(8), max_steps=6, ckpt_path=path)
    r = guard2.records
    assert (r.steps, r.skipped, r.longest_run) == (6, 2, 2)
    assert r.bad_steps == [2, 3] == guard.records.bad_steps
    assert resumed.nanguard_logs[0][1:] == ("nanguard_skipped_steps", 2.0)  # not back to 0


def test_the_end_of_fit_prints_one_line_and_the_callback_plots(capsys, tmp_path):
    trainer, guard, _ = fit(Module(), loader(5, zero_rows=[2]))
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("nanguard GradGuard (policy 'skip'): 5 steps, 4 applied, 1 skipped")
    assert "non-finite gradients in net.embed.weight" in out[-1]
    pytest.importorskip("matplotlib")
    fig = guard.plot(str(tmp_path / "g.png"))
    assert "non-finite step" in [line.get_label() for line in fig.axes[0].get_lines()]


class GradsSeen(Module):
    """Keeps the gradients each update is about to apply."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.grads = []

    def on_before_optimizer_step(self, optimizer):
        super().on_before_optimizer_step(optimizer)
        self.grads.append([p.grad.clone() for p in self.parameters()])


def test_rollback_restores_the_snapshot_and_the_schedule_and_backs_the_lr_off():
    # snapshots before the updates of steps 0 and 2; step 3's NaN gradient brings back the
    # state step 2 started from, the StepLR included, and halves the LR of later updates
    module = GradsSeen(opt="sgd")
    callback = GuardCallback("rollback", snapshot_every=2, lr_backoff=0.5)
    trainer, guard, rec = fit(module, loader(6, zero_rows=[3]), guard=callback, max_steps=6)
    r = guard.records
    assert trainer.global_step == r.steps == 6
    assert (r.applied, r.skipped, r.rolled_back, r.steps_undone) == (5, 0, 1, 1)
    (event,) = r.events
    assert (event.step, event.action, event.steps_undone, event.lr_scale) == (
        4, "rolled back", 1, 0.5)
    assert_bitwise(rec.after[3], rec.before[2])  # parameters, optimizer state, its lr
    assert rec.lrs == pytest.approx([0.1 * 0.5 ** k for k in (1, 2, 3, 2, 3, 4)])
    # the scheduler's own position came back too (5 applied steps, 1 undone)
    assert trainer.lr_scheduler_configs[0].scheduler.last_epoch == 4
    assert module.clip_calls == 5  # not on the rolled-back step
    for step, scale in ((2, 1.0), (4, 0.5), (5, 0.5)):  # SGD: the update is -lr * grad
        lr = rec.before[step]["state"]["param_groups"][0]["lr"]
        for before, after, grad in zip(rec.before[step]["params"], rec.after[step]["params"],
                                       module.grads[step]):
            torch.testing.assert_close(after - before, -scale * lr * grad)
    assert trainer.callback_metrics["nanguard_rollbacks"] == 1.0


def test_rollback_arguments_are_checked():
    with pytest.raises(ValueError, match="`spike` belongs to policy='rollback'"):
        GuardCallback(spike=dict(loss=5.0))
    with pytest.raises(ValueError, match="needs hold_schedule=True"):
        GuardCallback("rollback", hold_schedule=False)
