"""Reports on third-party models (issue 14): a diverged run is called diverged, and a finding
inside an installed library (transformers, timm) also shows the user's own line."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch
from torch import nn

import nanguard
from nanguard.core.hazards import HAZARDS

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


def _diverging_run(exhaustive: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.Linear(32, 32), nn.LayerNorm(32), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e3)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(30):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if d.report is not None:
                break
    return d.report


@pytest.mark.parametrize("exhaustive", MODES)
def test_layer_norm_nan_after_a_huge_learning_rate_says_training_diverged(exhaustive):
    report = _diverging_run(exhaustive)
    assert report is not None and report.op == "aten.native_layer_norm.default" and report.kind == "nan"
    hazard = HAZARDS["diverged_scale"]
    assert report.explanation.endswith(hazard.why_text() + ".")
    assert "learning rate" in report.explanation and "the weights reach" in report.explanation
    assert report.suggestion == hazard.fix_text() + "."
    assert "no hazard" not in report.explanation


def test_a_square_that_overflows_is_not_blamed_on_negative_bases():
    big = torch.tensor([-3e20, 2e20, 1.0])
    with nanguard.detect(mode="record") as d:
        big ** 2
    assert d.report is not None and d.report.kind == "inf"
    assert "negative" not in d.report.explanation
    assert "diverged" in d.report.explanation


def test_ordinary_overflow_keeps_its_own_explanation():
    with nanguard.detect(mode="record") as d:
        torch.tensor([200.0]).exp()
    assert d.report is not None and "diverged" not in d.report.explanation


LIBRARY = textwrap.dedent("""\
    import torch
    from torch import nn


    def attention_scores(x):
        return torch.log(x * 0)


    class Block(nn.Module):
        def forward(self, x):
            return torch.sqrt(x - 10.0)
""")


@pytest.fixture
def fakelib(tmp_path, monkeypatch):
    """A package installed in a site-packages folder: library code, not the user's."""
    site = tmp_path / "site-packages"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text("")
    (site / "fakelib" / "modeling.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield importlib.import_module("fakelib.modeling")
    sys.modules.pop("fakelib.modeling", None)
    sys.modules.pop("fakelib", None)


def test_text_report_shows_the_users_line_for_a_finding_in_a_library_function(fakelib):
    with nanguard.detect(mode="record") as d:
        fakelib.attention_scores(torch.ones(3))   # USER-LINE-1
    report = d.report
    assert report is not None and report.file.endswith("modeling.py") and report.line == 6
    text = report.format(color=False)
    site = report.user_call_site()
    assert site is not None and site.file == __file__ and site.code.endswith("# USER-LINE-1")
    assert f"from {site.short_file}:{site.line} in {site.function}" in text
    assert "# USER-LINE-1" in text


@pytest.mark.parametrize("exhaustive", MODES)
def test_text_report_shows_the_users_line_for_a_finding_in_a_library_module(fakelib, exhaustive):
    block = fakelib.Block()
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        block(torch.ones(3))   # USER-LINE-2
    report = d.report
    assert report is not None and report.file.endswith("modeling.py") and report.line == 11
    assert "# USER-LINE-2" in report.format(color=False)


def test_a_finding_in_the_users_own_code_has_no_extra_call_site():
    with nanguard.detect(mode="record") as d:
        torch.log(torch.zeros(2))
    assert d.report.user_call_site() is None
    assert "\n  from " not in d.report.format(color=False)


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_deprecation_wrapper_between_the_user_and_the_op_is_not_the_users_line(exhaustive):
    # torch.distributed's functions are wrapped by typing_extensions.deprecated, whose frame
    # (typing_extensions.py) used to be reported as the user's line
    typing_extensions = pytest.importorskip("typing_extensions")
    # a torch function in Python, wrapped as torch.distributed's are
    old_kl_div = typing_extensions.deprecated("use kl_div", category=DeprecationWarning)(nn.functional.kl_div)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d, pytest.warns(DeprecationWarning):
        old_kl_div(torch.zeros(2), torch.tensor([0.5, -1.0]), reduction="sum")   # log of a negative target
        called_at = sys._getframe().f_lineno - 1
    assert d.report is not None and d.report.line == called_at
    assert d.report.file == __file__
