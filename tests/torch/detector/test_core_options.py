"""`nanguard.detect`'s options are parsed by core (issue 29): the setters reject what the
constructor rejects, naming the accepted values."""

from __future__ import annotations

import pytest
import torch

import nanguard


def test_the_mode_setter_rejects_an_unknown_mode():
    det = nanguard.detect(mode="record")
    with pytest.raises(ValueError, match="nanguard.detect: mode must be 'raise', 'warn' or 'record', got 'stop'"):
        det.mode = "stop"
    assert det.mode == "record"
    det.mode = "warn"
    assert det.mode == "warn"


def test_the_check_and_exhaustive_setters_parse_their_value():
    det = nanguard.detect()
    det.check = "nan"
    assert det.check == frozenset({"nan"})
    det.check = "all"
    assert det.check == frozenset({"nan", "inf"})
    with pytest.raises(ValueError, match="'nan', 'inf', 'both' or 'all'"):
        det.check = "nans"
    with pytest.raises(TypeError, match="exhaustive must be True or False"):
        det.exhaustive = "yes"


def test_a_mode_set_after_construction_is_the_one_used():
    det = nanguard.detect()
    det.mode = "record"
    with det:
        torch.log(torch.zeros(2))
    assert det.report is not None and det.report.op == "aten.log.default"
