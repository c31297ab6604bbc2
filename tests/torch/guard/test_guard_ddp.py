"""Under torch.distributed every rank makes the same decision: real 2-process gloo runs.

Each test spawns two Python processes (ddp_worker.py) that rendezvous through a file store
in the test's temporary directory, so there is no port to collide on. If a rank fails, the
other is killed at once; a deadline bounds the whole run, so a broken agreement shows up as
a failure with both ranks' logs, never as a hang.
"""

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

WORKER = Path(__file__).with_name("ddp_worker.py")


def spawn(scenario: str, tmp_path: Path, world: int = 2, deadline_s: float = 90.0) -> list:
    store = tmp_path / "store"
    commands = [[str(WORKER), scenario, str(rank), str(world), str(store),
                 str(tmp_path / f"rank{rank}.json")] for rank in range(world)]
    return launch(scenario, commands, [{}] * world, tmp_path, deadline_s)


def test_ddp_nan_batch_on_rank_1_only_both_ranks_skip_together(tmp_path):
    r0, r1 = spawn("ddp", tmp_path)
    # step 2: rank 1's batch gives a NaN gradient (finite loss); step 4: a NaN loss
    expected = [True, True, False, True, "loss", True]
    assert r0["decisions"] == r1["decisions"] == expected
    assert r0["params"] == r1["params"]  # replicas identical after every step
    assert r0["params"][3] == r0["params"][2]  # the skipped step changed nothing
    assert r0["params"][5] == r0["params"][4]  # nor did the skipped batch
    assert len(set(r0["params"])) == 5
    grad_event, loss_event = r0["events"]
    assert grad_event["step"] == 3 and grad_event["kind"] == "gradients"
    # DDP averaged rank 1's NaN into rank 0's gradient, so both ranks saw it
    assert grad_event["ranks"] == [0, 1]
    assert [p["name"] for p in grad_event["params"]] == ["embed.weight"]  # DDP's `module.` is gone
    assert loss_event["kind"] == "loss" and loss_event["ranks"] == [1] and loss_event["step"] == 5
    assert "non-finite losses: 1 (before step 5 on rank 1)" in r0["summary"] == r1["summary"]
    assert "embed.weight  8×4     32" in r1["summary"]


def test_no_sync_accumulation_with_a_nan_in_one_ranks_local_gradient(tmp_path):
    r0, r1 = spawn("no_sync", tmp_path)
    # the NaN really was local to rank 1 before the synchronised micro-batch
    assert r0["local_finite_after_micro0"] == [True, True, True, True]
    assert r1["local_finite_after_micro0"] == [True, False, True, True]
    assert r0["decisions"] == r1["decisions"] == [True, False, True, True]
    assert r0["params"] == r1["params"]
    assert r0["params"][2] == r0["params"][1]
    assert r0["events"][0]["step"] == r1["events"][0]["step"] == 2


def test_an_accumulation_window_with_a_nan_loss_on_one_rank_is_skipped_by_both(tmp_path):
    r0, r1 = spawn("window", tmp_path)
    assert r0["decisions"] == r1["decisions"] == [True, False, True, True]
    # rank 1's loss of micro-batch 2 at step 1 is NaN; neither rank backpropagates it
    assert r0["ran"] == r1["ran"] == [True, True, True, False, True, True, True, True]
    assert r0["params"] == r1["params"] and r0["params"][2] == r0["params"][1]
    assert r0["lr"] == r1["lr"] == [0.005, 0.005, 0.0025, 0.00125]  # held on the skip
    (event,) = r0["events"]
    assert (event["kind"], event["action"], event["step"]) == ("loss", "skipped", 2)
    assert event["ranks"] == [1] and event["micro_batches"] == [2] and event["window"] == 2
    assert "cannot be used under torch.distributed" in r0["drop"]


def test_agreement_is_what_keeps_local_replicas_identical(tmp_path):
    r0, r1 = spawn("local", tmp_path)
    agreed0, agreed1 = r0["agreed"], r1["agreed"]
    # with agreement: both skip the step only rank 1 found bad, and both apply the step whose
    # norm overflowed on rank 1 (confirmed finite element by element: no false skip)
    assert agreed0["decisions"] == agreed1["decisions"] == [True, True, False, True, True]
    assert agreed0["params"][:3] == agreed1["params"][:3]
    assert agreed0["events"][0]["ranks"] == [1] and agreed0["events"][0]["params"] == []
    assert agreed1["events"][0]["params"][0]["name"] == "embed.weight"
    # without it (distributed=False) rank 0 steps alone and the replicas drift apart
    local0, local1 = r0["local"], r1["local"]
    assert local0["decisions"] == [True] * 5 and local1["decisions"] == [True, True, False, True, True]
    assert local0["params"][2] != local1["params"][2]
    # with a GradScaler: rank 1 overflowed alone; both skipped and both scales halved once
    assert r0["amp"] == r1["amp"]
    assert r0["amp"]["decisions"] == [True, False, True]
    assert r0["amp"]["scales"] == [1024.0, 512.0, 512.0]
    # policy "raise": rank 0 had finite gradients but raises too, naming rank 1
    assert r0["raised"] and r1["raised"]
    assert "on rank 1" in r0["raised"] and "embed.weight" in r1["raised"]


def test_fsdp2_sharded_gradients_skip_clip_and_count_as_full_tensors(tmp_path):
    pytest.importorskip("torch.distributed.fsdp")
    r0, r1 = spawn("fsdp2", tmp_path)
    # the shards really differ: head's 1-row weight and 1-element bias live on rank 0 only
    assert r0["local_numel"] == [16, 8, 1] and r1["local_numel"] == [16, 0, 0]
    assert r0["decisions"] == r1["decisions"] == [True, True, False, True]
    fp = r0["fingerprints"]
    assert fp == r1["fingerprints"]  # full parameters and Adam moments agree
    assert fp[3] == fp[2] and len(set(fp)) == 4  # the skipped step changed nothing
    # the clip used the full gradients' norm, on every rank, as torch's DTensor-aware clip
    assert r0["totals"][:2] == r1["totals"][:2]
    for ours, theirs in zip(r0["totals"], r0["torch_totals"]):
        assert ours == pytest.approx(theirs, rel=1e-6) or (ours != ours and theirs != theirs)
    assert r0["grads_match_torch"] == r1["grads_match_torch"] == [True, True, True]
    assert r0["module_norms"] == r1["module_norms"]  # the monitor sees the same full norms
    (event,) = r0["events"]
    assert event == r1["events"][0]
    assert event["step"] == 3 and event["action"] == "skipped"
    # counts of the full 8x4 tensor (16 elements per shard), not of one shard
    assert [(p["name"], p["nan"]) for p in event["params"]] == [("embed.weight", 32)]
    assert "embed.weight  8×4     32" in r0["summary"]
    assert r0["zero_applied"] is r1["zero_applied"] is True
    assert r0["zero_event"]["params"][0]["nan"] == 32 and r0["finite_after_zero"] and r1["finite_after_zero"]
    assert r0["safe_before"] is r1["safe_before"] is True
    assert r0["safe_after_poison"] is r1["safe_after_poison"] is False  # rank 1's shard only
    assert r0["nonfinite_state"] == [] and r1["nonfinite_state"] == ["embed.weight"]
    assert "sharded (DTensor" in r0["local_guard"] and "distributed=False" in r1["local_guard"]


@pytest.mark.parametrize("scenario", ["fsdp1", "fsdp1_orig"])
def test_fsdp1_slices_skip_together_and_clip_with_the_global_norm(scenario, tmp_path):
    r0, r1 = spawn(scenario, tmp_path)
    assert r0["decisions"] == r1["decisions"] == [True, True, False, True]
    for r in (r0, r1):  # each rank's own slice (and Adam state) is untouched by the skip
        fp = r["fingerprints"]
        assert fp[3] == fp[2] and len(set(fp)) == 4
    assert r0["fingerprints"] != r1["fingerprints"]  # the slices really are different
    # the global norm on every rank (per slice it would be 0.247 vs 1.380, as issue 13 saw)
    assert r0["totals"][:2] == r1["totals"][:2]
    for ours, theirs in zip(r0["totals"], r0["fsdp_totals"]):
        assert ours == pytest.approx(theirs, rel=1e-6) or (ours != ours and theirs != theirs)
    assert r0["grads_match_fsdp"] == r1["grads_match_fsdp"] == [True, True, True]
    assert r0["module_norms"] == r1["module_norms"]
    (event,) = r0["events"]
    assert event == r1["events"][0] and event["step"] == 3
    if scenario == "fsdp1_orig":  # the wrapper's `_fsdp_wrapped_module.` is gone
        assert r0["names"] == ["embed.weight", "head.weight", "head.bias"]
        assert [(p["name"], p["shape"], p["nan"]) for p in event["params"]] == [
            ("embed.weight", [8, 4], 32)]  # the full shape and count, not a 1-d slice's
    else:  # one FlatParameter: named by what it flattens, its full (unpadded) length
        assert r0["names"] == ["flat[embed.weight, head.weight, head.bias]"]
        assert [(p["shape"], p["nan"]) for p in event["params"]] == [([41], 32)]


def test_rollback_restores_every_rank_to_the_same_bits_as_a_single_process(tmp_path):
    r0, r1 = spawn("rollback", tmp_path)
    # step 3: rank 1's NaN gradient; step 7: rank 1's loss spike. Snapshots are taken before
    # the updates of steps 0, 2, 4 and 6 (every 2nd applied step)
    expected = [True, True, True, False, True, True, True, False, True]
    assert r0["decisions"] == r1["decisions"] == r0["single_decisions"] == expected
    fp = r0["fingerprints"]  # fp[k]: after step k - 1
    assert fp == r1["fingerprints"] == r0["single_fingerprints"] == r1["single_fingerprints"]
    assert fp[4] == fp[2]  # back to the snapshot before step 2's update
    assert fp[8] == fp[6]  # back to the snapshot before step 6's update
    assert len(set(fp)) == 8  # 10 fingerprints, two of them repeats
    nan_event, spike_event = r0["events"]
    assert nan_event == r1["events"][0] and spike_event["kind"] == r1["events"][1]["kind"]
    assert (nan_event["kind"], nan_event["action"], nan_event["steps_undone"]) == (
        "gradients", "rolled back", 1)
    assert nan_event["ranks"] == [0, 1]  # DDP averaged rank 1's NaN into rank 0's gradient
    assert (spike_event["kind"], spike_event["ranks"], spike_event["steps_undone"]) == (
        "loss spike", [1], 1)
    assert spike_event["loss"] is None and r1["events"][1]["loss"] > 1e5  # rank 1's own value
    assert r0["lr_scale"] == r1["lr_scale"] == 0.25


def test_fsdp2_rollback_restores_each_ranks_own_shards(tmp_path):
    pytest.importorskip("torch.distributed.fsdp")
    r0, r1 = spawn("fsdp2_rollback", tmp_path)
    expected = [True, True, True, False, True, True, True, False, True]
    assert r0["decisions"] == r1["decisions"] == expected
    fp = r0["fingerprints"]
    assert fp == r1["fingerprints"]  # the full parameters and Adam moments agree
    assert fp[4] == fp[2] and fp[8] == fp[6] and len(set(fp)) == 8
    assert r0["local"] != r1["local"]  # each rank restored different shards
    assert r0["local"][3] == r0["local"][1] and r1["local"][3] == r1["local"][1]
    assert [e["kind"] for e in r0["events"]] == ["gradients", "loss spike"]
