"""GuardedOptimizer under model.fit: a planted NaN batch skips exactly that step (graph and
XLA), "raise" stops fit through GuardCallback, and the guard survives model.save/load."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_guard_helpers import bits, make_model

import nanguard.tf as nt

BATCH, POISONED = 2, 2  # the third batch (0-based 2) holds a NaN


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 3)).astype(np.float32)
    x[POISONED * BATCH + 1, 1] = np.nan
    return x, rng.normal(size=(10, 1)).astype(np.float32)


class Snapshots(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights, self.slots = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.weights.append(bits(self.model.trainable_variables))
        self.slots.append(bits(self.model.optimizer.inner_optimizer.variables)
                          if isinstance(self.model.optimizer, nt.GuardedOptimizer) else [])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_skips_exactly_the_planted_nan_batch(jit_compile):
    x, y = data()
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2))
    model.compile(optimizer=opt, loss="mse", jit_compile=jit_compile)
    snaps = Snapshots()
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[snaps])
    assert snaps.weights[POISONED] == snaps.weights[POISONED - 1]
    assert snaps.slots[POISONED] == snaps.slots[POISONED - 1]
    assert all(snaps.weights[k] != snaps.weights[k - 1] for k in range(1, 5) if k != POISONED)
    assert all(np.isfinite(v.numpy()).all() for v in model.trainable_variables)
    records = opt.records
    assert (records.bad_steps, records.applied, records.skipped) == ([POISONED + 1], 4, 1)
    assert int(opt.iterations.numpy()) == 4
    assert set(records.params) == {v.path for v in model.trainable_variables}


def test_the_planted_batch_poisons_an_unguarded_fit():
    # the control: without the guard the same data leaves NaN weights
    x, y = data()
    model = make_model()
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert not all(np.isfinite(v.numpy()).all() for v in model.trainable_variables)


def test_fit_with_policy_raise_stops_with_the_variable_names():
    x, y = data()
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9), policy="raise")
    model.compile(optimizer=opt, loss="mse")
    snaps = Snapshots()
    with pytest.raises(nt.NonFiniteError, match=r"step 3: non-finite gradients in net/head/bias"):
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[snaps, nt.GuardCallback()])
    assert bits(model.trainable_variables) == snaps.weights[POISONED - 1]
    assert opt.records.raised == 1


def test_guard_callback_refuses_a_model_without_the_guard():
    x, y = data()
    model = make_model()
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    with pytest.raises(TypeError, match="not a GuardedOptimizer"):
        model.fit(x[:2], y[:2], verbose=0, callbacks=[nt.GuardCallback()])


def test_the_guard_survives_model_save_and_load(tmp_path):
    x, y = data()
    model = make_model()
    model.compile(optimizer=nt.GuardedOptimizer(keras.optimizers.Adam(1e-2), policy="zero", max_consecutive=7),
                  loss="mse")
    model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    path = tmp_path / "guarded.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    opt = loaded.optimizer
    assert isinstance(opt, nt.GuardedOptimizer)
    assert (opt.policy, opt.max_consecutive, type(opt.inner_optimizer).__name__) == ("zero", 7, "Adam")
    assert opt.records.zeroed == 1 and opt.records.steps == 5  # the counters are optimizer variables


@pytest.mark.parametrize("jit_compile", [False, True])
def test_max_consecutive_stops_fit_without_the_callback(jit_compile):
    # issue 31: without GuardCallback, fit skipped forever in silence
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3)).astype(np.float32)
    x[2:10, 0] = np.nan  # batches 1-4 of 6: four bad steps in a row
    y = rng.normal(size=(12, 1)).astype(np.float32)
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2), max_consecutive=3)
    model.compile(optimizer=opt, loss="mse", jit_compile=jit_compile)
    # in a graph the 3rd bad step raises; XLA cannot, so fit raises the last one when it ends
    error = nt.NonFiniteError if jit_compile else tf.errors.InvalidArgumentError
    with pytest.raises(error, match=rf"{4 if jit_compile else 3} bad steps in a row \(max_consecutive=3\)"):
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)


class BatchLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(logs.get("nanguard_skipped_steps"))


def test_the_skip_count_reaches_history_csv_and_the_batch_logs_and_fit_ends_with_one_line(
        tmp_path, capsys):
    # issue 31: an epoch with a skipped batch showed only `loss: nan`
    x, y = data()
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2))
    model.compile(optimizer=opt, loss="mse")
    batches, csv = BatchLogs(), tmp_path / "log.csv"
    history = model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=2,
                        callbacks=[nt.GuardCallback(), keras.callbacks.CSVLogger(str(csv)), batches])
    assert history.history["nanguard_skipped_steps"] == [1, 2]
    assert batches.seen == [0, 0, 1, 1, 1, 1, 1, 2, 2, 2]
    assert "nanguard_skipped_steps" in csv.read_text().splitlines()[0]
    out = capsys.readouterr().out
    assert "nanguard_skipped_steps: 1" in out  # the progress line of the first epoch
    lines = [x for x in out.splitlines() if x.startswith("nanguard GuardedOptimizer")]
    assert lines == ["nanguard GuardedOptimizer (policy 'skip'): 10 steps, 8 applied, 2 skipped, "
                     "0 zeroed; non-finite gradients in net/head/bias, net/head/kernel, "
                     "net/hidden/bias and 1 more"]
