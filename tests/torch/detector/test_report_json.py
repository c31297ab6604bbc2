"""A torch report is frozen, names the user's spelling as `api`, and its JSON reads back exactly."""

from __future__ import annotations

import torch

import nanguard
from tests.core.report_checks import assert_settled

# The keys of a single-process torch finding's JSON before the report was nested (issue 29),
# which consumers parse, plus the two it gained: ``api`` (on every backend) and ``framework``.
KEYS_BEFORE = {"found", "phase", "kind", "op", "torch_function", "node", "module", "file", "line", "function",
               "code", "forward_file", "forward_line", "forward_function", "forward_code", "forward_op",
               "call_file", "call_line", "call_code", "call_name", "message", "explanation", "suggestion",
               "inputs", "outputs", "forward_inputs", "scalars", "step", "stack", "how", "notes"}


def test_a_forward_finding_keeps_its_json_keys_and_reads_back() -> None:
    with nanguard.detect(mode="record") as d:
        torch.log(torch.zeros(3))
    r = d.report
    assert (r.op, r.api) == ("aten.log.default", "torch.log")
    data = assert_settled(r, "torch")
    assert set(data) == KEYS_BEFORE | {"api", "framework"}


def test_a_backward_finding_names_its_forward_line_and_its_call() -> None:
    x = torch.zeros(3, requires_grad=True)
    with nanguard.detect(mode="record") as d:
        torch.sqrt(x).sum().backward()
    r = d.report
    assert (r.phase, r.node, r.api) == ("backward", "SqrtBackward0", "torch.sqrt")
    assert r.forward.op == "aten.sqrt.default" and r.forward.line == r.where.line == r.call.line
    assert r.call_name == "backward()"
    assert_settled(r, "torch")
