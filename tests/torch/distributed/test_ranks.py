"""``nanguard run`` on every rank of a torchrun job, and the merged report of the ranks.

The end-to-end tests launch torchrun (2 gloo processes) on allreduce_train.py, where rank 1
makes a NaN at step 3 and rank 0 only receives it through a hand-written gradient all-reduce.
The merge itself is also tested on hand-made per-rank reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from nanguard.run.ranks import merge
from tests.shared import ROOT

PROGRAM = Path(__file__).with_name("allreduce_train.py")
distributed = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is not available")


def line_of(marker: str) -> int:
    for number, text in enumerate(PROGRAM.read_text().splitlines(), 1):
        if f"# {marker}" in text:
            return number
    raise AssertionError(marker)


def launch(command: list, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        return subprocess.run(command, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired as err:   # a rank waiting in a collective forever
        pytest.fail(f"timed out: {err.stdout}\n{err.stderr}")


@pytest.mark.slow
@distributed
def test_torchrun_merged_report_names_rank_1_first_and_rank_0_as_receiving_through_all_reduce(tmp_path):
    reports = tmp_path / "reports"
    done = launch([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                   "-m", "nanguard", "run", "--json-dir", str(reports), "--json", "report.json", str(PROGRAM)],
                  tmp_path)
    assert done.returncode != 0, "a NaN was found: nanguard run exits 1 on the ranks that report"
    assert "rank 0 done" in done.stdout and "rank 1 done" in done.stdout, done.stderr  # both ran to the end
    r0, r1 = (json.loads((reports / f"rank{r}.json").read_text()) for r in range(2))
    assert (r1["rank"], r1["phase"], r1["step"], r1["line"], r1["op"]) == (1, "forward", 3, line_of("ORIGIN"),
                                                                            "aten.log.default")
    assert "received_through" not in r1
    assert (r0["rank"], r0["received_through"], r0["line"], r0["step"]) == (0, "all_reduce", line_of("RECEIVED"), 3)
    merged = json.loads((reports / "merged.json").read_text())
    assert merged["found"] and merged["world_size"] == 2 and merged["first_rank"] == 1
    assert (merged["first"]["line"], merged["first"]["step"], merged["first"]["phase"]) == (line_of("ORIGIN"), 3,
                                                                                            "forward")
    assert [r["status"] for r in merged["ranks"]] == ["received", "first"]
    assert merged["message"].startswith("rank 1 went non-finite first (step 3, forward)")
    assert "rank 0 received it through all_reduce" in merged["message"]
    assert "rank 1 went non-finite first" in done.stderr   # rank 0 prints the merged verdict
    # --json under torchrun: one file per rank, never the same path written twice
    assert json.loads((tmp_path / "report.rank0.json").read_text())["received_through"] == "all_reduce"
    assert json.loads((tmp_path / "report.rank1.json").read_text())["line"] == line_of("ORIGIN")


@pytest.mark.slow
@distributed
def test_nproc_runs_torchrun_itself_and_a_healthy_job_merges_to_no_finding(tmp_path):
    out = tmp_path / "merged.json"
    done = launch([sys.executable, "-m", "nanguard", "run", "--nproc", "2", "--json", str(out), str(PROGRAM),
                   "--healthy"], tmp_path)
    assert done.returncode == 0, done.stderr
    merged = json.loads(out.read_text())
    assert not merged["found"] and merged["first_rank"] is None
    assert [(r["rank"], r["status"]) for r in merged["ranks"]] == [(0, "clean"), (1, "clean")]


def _found(rank, step, phase, line=10, **extra):
    return {"found": True, "status": "found", "rank": rank, "step": step, "phase": phase, "kind": "nan",
            "op": "aten.log.default", "file": "/x/train.py", "line": line, **extra}


def test_merge_orders_origins_by_step_then_phase_and_never_takes_a_received_value_for_one():
    payloads = [_found(0, 2, "backward", received_through="all_reduce"),   # earliest, but received
                _found(1, 3, "forward"),
                _found(2, 2, "backward", line=20),
                _found(3, 2, "forward", line=30)]
    merged = merge(payloads, 4)
    assert merged["first_rank"] == 3
    assert [r["status"] for r in merged["ranks"]] == ["received", "also made", "also made", "first"]


def test_merge_prefers_a_located_finding_and_lists_missing_and_clean_ranks():
    payloads = [_found(0, 1, "backward", line=None),     # a coarse report: could not be located
                _found(1, 2, "forward"),
                {"rank": 2, "missing": True},
                {"rank": 3, "found": False, "status": "clean", "message": "no NaN or Inf was detected"}]
    merged = merge(payloads, 4)
    assert merged["first_rank"] == 1
    assert [r["status"] for r in merged["ranks"]] == ["not located", "first", "missing", "clean"]
    assert "rank 2 wrote no report" in merged["message"] and "rank 3 saw none" in merged["message"]
    assert merge([payloads[3]], 1)["found"] is False


def test_merge_names_the_only_rank_that_did_not_receive_when_none_located_an_origin():
    # FSDP2 in the default mode: rank 1's backward made the NaN, rank 0 got it through reduce_scatter
    merged = merge([_found(0, 1, "backward", line=None, received_through="reduce_scatter"),
                    _found(1, 1, "backward", line=None)], 2)
    assert merged["first_rank"] == 1
    assert [r["status"] for r in merged["ranks"]] == ["received", "first (not located)"]
    assert merged["message"].startswith("rank 1 went non-finite first (step 1, backward): it made the NaN")


def test_merge_names_no_first_rank_when_no_rank_located_an_origin():
    # several ranks saw values they could not place, none with evidence of receiving them
    merged = merge([_found(0, 1, "backward", line=None), _found(1, 1, "backward", line=None)], 2)
    assert merged["found"] and merged["first_rank"] is None and merged["first"] is None
    assert merged["message"].startswith("no rank located where the non-finite values were made")
    assert [r["status"] for r in merged["ranks"]] == ["not located", "not located"]


@pytest.mark.slow
@distributed
def test_readme_distributed_example_prints_the_merged_verdict_it_shows(tmp_path):
    import re
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", readme, re.S | re.M)
    i = next(i for i, (lang, text) in enumerate(blocks) if lang == "python" and "dist.all_reduce(p.grad)" in text)
    program, shown = blocks[i][1], blocks[i + 1][1].rstrip("\n").splitlines()
    assert shown[0] == "$ torchrun --nproc_per_node 2 -m nanguard run --json-dir reports train.py"
    (tmp_path / "train.py").write_text(program)
    done = launch([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                   "-m", "nanguard", "run", "--json-dir", "reports", "train.py"], tmp_path)
    lines = done.stderr.splitlines()
    start = lines.index(shown[2])          # after the "... (each rank's report" line
    assert lines[start:start + len(shown) - 2] == shown[2:]
    assert json.loads((tmp_path / "reports" / "merged.json").read_text())["first_rank"] == 1
