"""Ranks bitwise equal after a rollback, where skipping leaves them apart: 2 gloo processes,
DDP and FSDP2, rank 1 alone holding an inf in its copy of the weights (the float16 overflow
of the planted-spike benchmark) until the rollback brings both ranks back to the snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist

from tests.shared import launch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                       reason="torch.distributed with gloo is not available"),
]

WORKER = Path(__file__).with_name("rollback_ranks_worker.py")


def spawn(scenario: str, tmp_path: Path, deadline_s: float = 120.0) -> list:
    store = tmp_path / "store"
    commands = [[str(WORKER), scenario, str(rank), "2", str(store),
                 str(tmp_path / f"rank{rank}.json")] for rank in range(2)]
    return launch(scenario, commands, [{}] * 2, tmp_path, deadline_s)


@pytest.mark.parametrize("kind", ["ddp", "fsdp2"])
def test_a_rollback_brings_an_inf_held_by_one_rank_back_to_equal_ranks(kind, tmp_path):
    if kind == "fsdp2":
        pytest.importorskip("torch.distributed.fsdp")
    r0, r1 = spawn(f"{kind}-rollback", tmp_path)
    # snapshots before the updates of steps 0 and 2; rank 1 poisons itself after step 2's
    # update; step 3's non-finite loss (rank 1's) rolls both ranks back to before step 2
    assert r0["decisions"] == r1["decisions"] == [True, True, True, False, True, True, True]
    fp0, fp1 = r0["fingerprints"], r1["fingerprints"]  # fp[k]: after step k - 1
    if kind == "ddp":
        assert fp0[3] != fp1[3]  # the replicas really differed before the rollback
    assert fp0[4] == fp1[4] == fp0[2]  # back to the snapshot, the same bits on both ranks
    assert fp0[5:] == fp1[5:] and len(set(fp0[4:])) == 4  # and on together from there
    assert r0["finite"][3:] == r1["finite"][3:] == [True] * 4
    (event,) = r0["events"]
    # DDP: rank 1's own forward; FSDP2: both ranks all-gather rank 1's inf into their forward
    assert (event["kind"], event["action"], event["ranks"], event["steps_undone"]) == (
        "loss", "rolled back", [1] if kind == "ddp" else [0, 1], 1)
    assert r1["events"][0]["kind"] == "loss"


def test_skipping_leaves_ddp_replicas_apart_for_good(tmp_path):
    # the control: under "skip" the inf stays in rank 1's replica and every later step of
    # both ranks is skipped (the loss is non-finite on rank 1)
    r0, r1 = spawn("ddp-skip", tmp_path)
    assert r0["decisions"] == r1["decisions"] == [True, True, True] + [False] * 4
    assert r0["fingerprints"][-1] != r1["fingerprints"][-1]
    assert r1["finite"][-1] is False and r0["finite"][-1] is True
