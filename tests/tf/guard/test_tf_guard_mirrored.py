"""The same decision on every replica of a MirroredStrategy over 2 logical CPUs (in a fresh
process: logical devices must be configured before TensorFlow initialises), with a NaN
planted on one replica only. Keras all-reduces gradients inside the inner optimizer, so a
replica that judged only its own finite gradients would apply the other's NaN: the guard
judges the agreed verdict instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("tf_mirrored_worker.py")


def run_worker(*args: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))
    done = subprocess.run([sys.executable, str(WORKER), *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("bad_replica", [0, 1])
def test_skip_on_every_replica_when_one_replica_has_a_nan(bad_replica):
    out = run_worker("skip", str(bad_replica))
    assert out["unchanged"] == [True, True] and out["replicas_agree"] and out["finite"]
    assert out["iterations"] == 1 and out["counts"] == [1, 1, 0]
    assert out["ranks"] == [bad_replica]
    assert out["names"][0] == "net/head/bias" and out["error"] is None


def test_zero_on_every_replica_keeps_the_replicas_identical_and_finite():
    out = run_worker("zero", "1")
    assert out["unchanged"] == [False, False] and out["replicas_agree"] and out["finite"]
    assert out["iterations"] == 2 and out["counts"] == [1, 0, 1]


def test_raise_leaves_every_replica_untouched_and_fails_the_step():
    out = run_worker("raise", "1")
    assert out["unchanged"] == [True, True] and out["replicas_agree"]
    assert out["error"] is not None and "on rank 1" in out["error"]
    assert "net/head/bias (1 NaN, 0 Inf of 1)" in out["error"]


def test_fit_under_mirrored_strategy_skips_the_planted_batch():
    out = run_worker("fit")
    assert out == {"bad_steps": [2], "applied": 2, "ranks": [1], "finite": True, "iterations": 2}
