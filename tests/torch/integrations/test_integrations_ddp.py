"""The integrations under DDP: 2 CPU processes (gloo) per framework, launched the way torchrun
would launch them. A NaN loss on rank 1 alone, in the micro-batch whose backward all-reduces:
both ranks skip that optimizer step (no hang, no divergence), the schedule holds on both,
and the replicas stay bitwise identical. Under policy "rollback" the same planted loss brings
both ranks back to the snapshot, bitwise equal, the scheduler with them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.shared import launch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                       reason="torch.distributed with gloo is not available"),
]

WORKER = Path(__file__).with_name("ddp_integration_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(framework: str, tmp_path: Path, deadline_s: float = 150.0) -> list:
    port = str(free_port())
    envs = [dict(RANK=str(rank), LOCAL_RANK=str(rank), NODE_RANK="0", WORLD_SIZE="2",
                 LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            for rank in range(2)]
    commands = [[str(WORKER), framework, str(tmp_path / f"rank{rank}.json")] for rank in range(2)]
    return launch(framework, commands, envs, tmp_path, deadline_s)


def check_both_ranks_skip_window_2(r0: dict, r1: dict) -> None:
    assert r0["world"] == r1["world"] == 2
    for r in (r0, r1):
        # 3 optimizer steps, the 2nd skipped on both ranks: its last micro-batch's loss was NaN
        # on rank 1 only, and neither rank ran that backward
        assert (r["steps"], r["applied"], r["skipped"], r["nonfinite_losses"]) == (3, 2, 1, 1)
        assert r["events"] == [{"step": 2, "kind": "loss"}]
        # every rank's summary says whose loss it was
        assert r["line"].endswith("; 1 non-finite loss on rank 1")
        assert "micro-batch 2 of 2 on rank 1, window skipped" in r["summary"]
    assert r0["digests"] == r1["digests"]  # replicas identical after every step


def test_accelerate_ddp_a_nan_loss_on_one_rank_skips_the_step_on_both(tmp_path):
    r0, r1 = run("accelerate", tmp_path)
    assert r0["kind"] == "MULTI_CPU"
    check_both_ranks_skip_window_2(r0, r1)
    assert r0["digests"][1] == r0["digests"][0]  # the skipped step changed nothing
    assert r0["digests"][2] != r0["digests"][1]
    assert r0["lrs"] == r1["lrs"] and r0["lrs"][1] == r0["lrs"][0] > r0["lrs"][2]  # held


def test_hf_trainer_ddp_a_nan_loss_on_one_rank_skips_the_step_on_both(tmp_path):
    r0, r1 = run("hf", tmp_path)
    assert r0["kind"] == "MULTI_CPU"
    check_both_ranks_skip_window_2(r0, r1)
    assert r0["global_step"] == r1["global_step"] == 3
    # the LR each step used, logged by the Trainer; linear decay over 3 steps gives 1e-2,
    # 6.7e-3, 3.3e-3; held on the skipped step 2, step 3 uses step 2's rate again
    assert r0["lrs"] == r1["lrs"] == pytest.approx([1e-2, 1e-2 * 2 / 3, 1e-2 * 2 / 3])
    assert r0["skipped_logged"] == [0, 1, 1]


def test_lightning_ddp_a_nan_loss_on_one_rank_skips_the_step_on_both(tmp_path):
    r0, r1 = run("lightning", tmp_path)
    assert r0["kind"] == "DDPStrategy"
    check_both_ranks_skip_window_2(r0, r1)
    assert r0["global_step"] == r1["global_step"] == 3  # a skipped step counts: the run ends
    assert r0["digests"][1] == r0["digests"][0] != r0["digests"][2]
    assert r0["lrs"] == r1["lrs"] and r0["lrs"][1] == r0["lrs"][0] > r0["lrs"][2]  # held


@pytest.mark.parametrize("framework", ["accelerate", "hf", "lightning"])
def test_rollback_inside_each_framework_brings_both_ranks_back_together(framework, tmp_path):
    # policy "rollback", a snapshot before every update: rank 1's NaN loss at step 2 rolls
    # both ranks back to the state before step 1's update, the same bits on both
    r0, r1 = run(f"{framework}-rollback", tmp_path)
    for r in (r0, r1):
        assert (r["steps"], r["applied"], r["skipped"], r["rolled_back"]) == (3, 2, 0, 1)
        assert r["events"] == [{"step": 2, "kind": "loss"}] and r["actions"] == ["rolled back"]
    assert r0["digests"] == r1["digests"]
    if framework != "hf":  # one digest a step: step 2 undid step 1, step 3 moved on
        assert len(set(r0["digests"])) == 3
        # StepLR(gamma=0.5): restored to its start by the rollback, held, then stepped
        # (accelerate steps it once per process: x0.25 a step on 2 ranks)
        after_one = 2.5e-3 if framework == "accelerate" else 5e-3
        assert r0["lrs"] == r1["lrs"] == pytest.approx([after_one, 1e-2, after_one])
