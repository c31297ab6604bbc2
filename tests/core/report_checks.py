"""What every backend's real report must satisfy (used by the torch, TF and JAX report tests):
frozen, read back exactly from its JSON, and its flat JSON names the same as its nested places."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from nanguard.core.report import Report

PLACES = (("", "where", ("file", "line", "function", "code")),
          ("forward_", "forward", ("file", "line", "function", "code", "op")),
          ("call_", "call", ("file", "line", "code")))


def assert_settled(report: Any, framework: str) -> dict:
    """Check ``report`` (a `Report` from ``framework``'s detector) and return its JSON dict."""
    assert isinstance(report, Report) and report.framework == framework
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.phase = "forward"
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.where = None
    for name in ("inputs", "outputs", "forward_inputs", "scalars", "stack", "notes"):
        assert isinstance(getattr(report, name), tuple), name
    d = json.loads(report.to_json())
    back = Report.from_dict(d)
    assert back == report
    assert back.to_dict() == d
    for prefix, attr, parts in PLACES:
        place = getattr(report, attr)
        for part in parts:
            value = getattr(place, part) if place is not None else None
            assert getattr(report, prefix + part) == value == d[prefix + part], prefix + part
    assert d["api"] == report.api is not None
    assert d["torch_function"] == (report.api if framework == "torch" else None) == report.torch_function
    return d
