"""The same decision on every device: pmap and shard_map over 2 host devices (in a fresh
process, since XLA_FLAGS must be set before JAX starts), a NaN planted on device 1 only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optax")

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("jax_devices_worker.py")


def run_worker(mode: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))
    done = subprocess.run([sys.executable, str(WORKER), mode], capture_output=True, text=True, env=env,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_pmap_skip_is_agreed_and_counts_are_summed_over_devices():
    out = run_worker("skip")
    assert out["unchanged"] == [True, True]  # device 0's gradients were finite, it skipped too
    assert out["skipped"] == [1, 1] and out["applied"] == [1, 1]
    assert out["leaf_nan"] == [[0, 1], [0, 1]]  # leaves in path order: b, w
    assert out["devices_agree"] and out["event_devices"][0] == 1
    assert out["error"] is None and "w " in out["summary"]


def test_pmap_without_axis_name_lets_devices_diverge():
    # the control: this is what axis_name prevents
    out = run_worker("local")
    assert out["unchanged"] == [False, True] and not out["devices_agree"]


def test_pmap_raise_raises_from_the_step_naming_the_leaf():
    out = run_worker("raise")
    assert "w [3]: 1 NaN, 0 Inf of 3 elements" in out["step_error"]


def test_shard_map_agrees_over_the_mesh_axis():
    out = run_worker("shard_map")
    assert out == {"finite_applied": 1, "bad_skipped": 1, "bad_unchanged": True, "bad_events": [2],
                   "leaf_inf": [1], "devices": 1}
