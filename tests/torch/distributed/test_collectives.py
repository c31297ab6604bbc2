"""The pieces of multi-rank detection that need no second process: collective names and
routes, the replay guard, and the rank taken from torchrun's environment."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import nanguard
from nanguard.torch.detector import collectives, sharded
from tests.torch.detector.programs import CATALOGUE

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")


def test_collective_names_are_the_same_for_c10d_and_functional_spellings():
    ops = torch.ops
    assert collectives.collective_name(ops.c10d.allreduce_.default) == "all_reduce"
    assert collectives.collective_name(ops._c10d_functional.all_reduce.default) == "all_reduce"
    assert collectives.collective_name(ops.c10d._allgather_base_.default) == "all_gather"
    assert collectives.collective_name(ops.c10d._reduce_scatter_base_.default) == "reduce_scatter"
    assert collectives.collective_name(ops._c10d_functional.reduce_scatter_tensor.default) == "reduce_scatter"
    assert collectives.collective_name(ops._c10d_functional.all_to_all_single.default) == "all_to_all"


def test_routes_separate_collectives_their_bookkeeping_and_ordinary_ops():
    ops = torch.ops
    assert collectives.route(ops.aten.log.default) == 0
    assert collectives.route(ops.c10d.allreduce_.default) == collectives.COLLECTIVE
    assert collectives.route(ops._c10d_functional.wait_tensor.default) == collectives.SKIP


def test_replay_guard_refuses_functional_collectives_only_with_other_ranks(monkeypatch):
    ns = torch.ops._c10d_functional
    original = ns.all_reduce
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with collectives.replay_guard():            # one process: nothing to refuse
        assert ns.all_reduce is original
    monkeypatch.setenv("WORLD_SIZE", "2")       # as torchrun sets it, before init_process_group
    assert sharded.multi_rank()
    with collectives.replay_guard():
        with pytest.raises(collectives.CollectiveReached, match="all_reduce"):
            ns.all_reduce(torch.ones(2), "sum", "0")
        with pytest.raises(collectives.CollectiveReached, match="all_gather"):
            ns.all_gather_into_tensor.default(torch.ones(2), 2, "0")
    assert ns.all_reduce is original            # put back


def test_rank_comes_from_torchrun_environment_before_the_process_group(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert sharded.process_rank() == 3
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert sharded.process_rank() is None and not sharded.multi_rank()


def test_received_gradients_are_told_from_gradients_made_here():
    from nanguard.core.report import Report
    received = Report(phase="backward", kind="nan", op="backward", rank=0)
    received = collectives.note_backward(received, [("reduce_scatter", torch.tensor(3.0, dtype=torch.float64))])
    assert received.received_through == "reduce_scatter"
    made = Report(phase="backward", kind="nan", op="backward", rank=1)
    made = collectives.note_backward(made, [("reduce_scatter", torch.tensor(float("nan"), dtype=torch.float64))])
    assert made.received_through is None and "made on this rank" in made.notes[-1]
    assert made.to_dict()["rank"] == 1 and "received_through" not in made.to_dict()


@pytest.mark.parametrize("case", CATALOGUE, ids=lambda c: c.name)
def test_default_mode_of_a_multi_rank_run_locates_every_catalogued_bug_as_one_process_does(case, monkeypatch):
    # the default mode checks inner modules too in a multi-rank run (sharded.nested_call); the
    # finding, its module path and its line are those of a single process
    monkeypatch.setenv("WORLD_SIZE", "2")
    with nanguard.detect(mode="record", check=case.check) as d:
        case.fn()
    r = d.report
    assert r is not None, case.name
    assert (r.phase, r.kind, r.op, r.node, r.module, r.line) == (case.phase, case.kind, case.op, case.node,
                                                                 case.module, case.line)


def test_a_collectives_output_buffer_is_not_counted_as_sent():
    # c10d marks no argument as written; an output buffer holds torch.empty's garbage (a NaN bit
    # pattern at times), which must not make this rank's input look non-finite (a flaky FSDP2 run
    # reported rank 0's received NaN as its own when reduce_scatter's new_empty buffer held NaN)
    c10d = torch.ops.c10d
    out, inp = torch.full((2,), float("nan")), torch.ones(4)
    sent, written = collectives.sent_and_written(c10d._reduce_scatter_base_.default, (out, inp, None, None), {})
    assert [t is inp for t in sent] == [True] and [t is out for t in written] == [True]
    outs, ins = [[torch.empty(2), torch.empty(2)]], [torch.ones(2)]
    sent, written = collectives.sent_and_written(c10d.allgather_.default, (outs, ins, None), {})
    assert len(sent) == 1 and sent[0] is ins[0] and len(written) == 2
    both = [torch.ones(3)]
    sent, written = collectives.sent_and_written(c10d.allreduce_.default, (both, None, None, None), {})
    assert sent == written == both    # in place: sent and received
    sent, written = collectives.sent_and_written(c10d.recv_.default, (both, None, 1, 0), {})
    assert (sent, written) == ([], both)
    # a keyword argument is found by its name too
    sent, written = collectives.sent_and_written(c10d._reduce_scatter_base_.default, (),
                                                 {"output_tensor": out, "input_tensor": inp})
    assert sent == [inp] and written == [out]
