"""The frozen `Report`, its one builder and its JSON round trip, without any framework."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nanguard.core.location import Frame, Place
from nanguard.core.report import Report
from nanguard.core.report_builder import build_report
from nanguard.core.summary import ScalarArg, TensorSummary

HERE = Frame(__file__, 12, "loss")
CALL = Frame(__file__, 14, "train")


def _backward() -> Report:
    uncounted = TensorSummary("out", (2, 3), "float32", "", 6, role="output", counted=False)
    counted = TensorSummary("x", (3,), "float32", "cpu", 3, min=0.0, max=2.0, zeros=1, posinf=1,
                            first_bad=(0,), role="forward input")
    return build_report(framework="torch", phase="backward", kind="inf", op="aten.div.Tensor", fn="torch.sqrt",
                        api="torch.sqrt", node="SqrtBackward0", where=HERE, code="y = torch.sqrt(x)",
                        forward_op="aten.sqrt.default", call=CALL, outputs=[uncounted], forward_inputs=[counted],
                        scalars=[ScalarArg("exponent", float("inf"))], notes=["a"], rank=1,
                        global_index=[4, 0], stack=[HERE, CALL])


def test_a_report_cannot_be_changed_and_with_notes_makes_a_new_one() -> None:
    notes = ["first"]
    r = build_report(framework="jax", phase="forward", kind="nan", op="log", api="jnp.log", where=HERE,
                     notes=notes)
    notes.append("later")                          # the maker's list is not the report's
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.kind = "inf"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.notes = ()
    more = r.with_notes("second")
    assert r.notes == ("first",) and more.notes == ("first", "second") and more.where == r.where


def test_a_backward_report_is_at_its_forward_line_and_says_so_in_its_flat_names() -> None:
    r = _backward()
    assert r.where == Place(HERE.file, 12, "loss", "y = torch.sqrt(x)")
    assert r.forward == dataclasses.replace(r.where, op="aten.sqrt.default")
    assert r.call == Place(CALL.file, 14, None, CALL.code) and r.call_name == "backward()"
    assert (r.file, r.line, r.function, r.code) == (HERE.file, 12, "loss", "y = torch.sqrt(x)")
    assert (r.forward_file, r.forward_line, r.forward_op) == (HERE.file, 12, "aten.sqrt.default")
    assert (r.call_file, r.call_line, r.call_code) == (CALL.file, 14, CALL.code)
    assert r.message == "backward of torch.sqrt produced Inf from finite values at " \
        f"{HERE.short_file}:12" and r.torch_function == "torch.sqrt" == r.api


def test_json_reads_back_to_an_equal_report() -> None:
    r = _backward()
    d = json.loads(r.to_json())
    assert d["outputs"][0]["nan"] is None and d["scalars"][0]["value"] == "inf"
    assert Report.from_dict(d) == r and Report.from_dict(d).to_dict() == d


def test_only_a_torch_report_has_a_torch_function() -> None:
    r = build_report(framework="tf", phase="forward", kind="nan", op="Log", api="tf.math.log", where=HERE)
    assert r.torch_function is None and r.to_dict()["torch_function"] is None and r.to_dict()["api"] == "tf.math.log"
    assert r.forward is None and r.call is None and r.message.startswith("Log produced NaN")
    with pytest.raises(ValueError, match="framework"):
        build_report(framework="mxnet", phase="forward", kind="nan", op="log")


def test_a_report_written_before_api_and_framework_reads_as_torch() -> None:
    old = {k: v for k, v in _backward().to_dict().items() if k not in ("api", "framework")}
    r = Report.from_dict(old)
    assert (r.framework, r.api, r.torch_function) == ("torch", "torch.sqrt", "torch.sqrt")
