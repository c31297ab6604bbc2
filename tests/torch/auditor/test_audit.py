"""nanguard.audit on small programs: what it must flag (at the right line, with the right fix),
what it must leave alone (the standard fixes, library ops that are safe), and its options."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
import torch.nn.functional as F

import nanguard
from nanguard.core.hazards import HAZARDS
from nanguard.torch.auditor import audit


def _line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _found(result, fn, marker: str):
    line = _line(fn, marker)
    return [f for f in result.findings if f.line == line]


def _quiet(fn, *args, **kwargs):
    result = audit(fn, *args, witness=False, **kwargs)
    assert result.findings == [], "\n\n".join(str(f) for f in [result])
    return result


# ------------------------------------------------------------------ the seed stories
def test_seed_where_log1p_exp_is_flagged_at_the_exp_with_softplus_and_a_witness():
    def step():
        x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
        exp = x.exp()  # EXP
        y = x.where(torch.isinf(exp), exp.log1p())
        y.sum().backward()

    result = audit(step)
    (f,) = _found(result, step, "EXP")
    assert f.hazard == "softplus" and f.kind == "exp_overflow" and f.witness is not None
    assert "nanguard.softplus" in f.fix


def test_seed_cross_entropy_by_hand_says_log_softmax():
    def loss(logits, y):
        p = torch.softmax(logits, -1)
        return -(y * torch.log(p)).sum()  # LOG

    result = audit(loss, torch.randn(4, 3), torch.eye(3)[[0, 1, 2, 0]])
    (f,) = _found(result, loss, "LOG")
    assert f.hazard == "log_softmax" and f.witness is not None
    _quiet(lambda logits, y: -(y * torch.log_softmax(logits, -1)).sum(), torch.randn(4, 3), torch.eye(3)[[0, 1, 2, 0]])
    _quiet(lambda logits, y: -(y * torch.log(torch.softmax(logits, -1) + 1e-10)).sum(), torch.randn(4, 3),
           torch.eye(3)[[0, 1, 2, 0]])


def test_seed_softmax_after_log_points_at_the_log_not_the_clip():
    def step():
        w = torch.nn.Parameter(torch.rand(6) + 0.5)
        logits = torch.log(w)  # LOG
        probs = torch.softmax(torch.clamp(logits, -15.0, 15.0), dim=0)
        probs[0].backward()

    (f,) = _found(audit(step, witness=False), step, "LOG")
    assert f.kind == "nonpositive"


def test_seed_mean_pooling_over_a_possibly_empty_sequence():
    def pool(x, lengths_source):
        mask = (lengths_source > 0).float()          # which tokens are real: depends on the data
        return (x * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)  # DIV

    result = audit(pool, torch.randn(2, 4, 3), torch.rand(2, 4), witness=False)
    (f,) = _found(result, pool, "DIV")
    assert f.hazard == "mean_empty" and "nanguard.masked_mean" in f.fix
    # an observed (exact) mask with no empty row is what it is: no finding
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    _quiet(lambda x: (x * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True), torch.randn(2, 4, 3))


def test_seed_distance_matrix_story_has_a_witness_and_its_fix_is_clean():
    story = nanguard.stories.get("distance_matrix") if hasattr(nanguard, "stories") else None
    import nanguard.stories as stories
    story = stories.get("distance_matrix")
    result = nanguard.audit_script(str(story.path("nan")), witness_budget=3.0)
    (f,) = result.findings
    assert f.line == story.line("torch.sqrt(") and f.hazard == "distance_matrix" and f.witness is not None
    assert nanguard.audit_script(str(story.path("fixed")), witness=False).findings == []


# ------------------------------------------------------------------ precision rules
def test_max_subtracted_exp_is_safe_and_plain_exp_is_not():
    _quiet(lambda x: torch.exp(x - x.max(-1, keepdim=True).values).sum(), torch.randn(3, 4))
    _quiet(lambda x: torch.exp(x - x.amax(-1, keepdim=True).detach()).sum(), torch.randn(3, 4))
    _quiet(lambda x: torch.exp(x - torch.logsumexp(x, -1, keepdim=True)), torch.randn(3, 4))
    result = audit(lambda x: torch.exp(x).sum(), torch.randn(3, 4), witness=False)
    assert [f.kind for f in result.findings] == ["exp_overflow"]


def test_square_is_non_negative_and_an_eps_keeps_sqrt_away_from_zero():
    _quiet(lambda x: torch.sqrt(x * x + 1e-8), torch.randn(5))
    _quiet(lambda x: torch.sqrt(x.pow(2).sum(-1) + 1e-12), torch.randn(3, 5))


def test_norm_by_hand_vs_library_norms():
    def by_hand(x):
        return torch.sqrt((x * x).sum(-1))  # SQRT

    w = torch.nn.Parameter(torch.randn(3, 5))
    result = audit(lambda: by_hand(w), witness=False)
    (f,) = _found(result, by_hand, "SQRT")
    assert f.hazard == "norm_zero" and f.phase == "gradient"
    _quiet(lambda: torch.linalg.vector_norm(w, dim=-1))
    _quiet(lambda: w.norm(dim=-1))
    _quiet(lambda: F.normalize(w, dim=-1))
    _quiet(lambda: w.std(-1))
    _quiet(lambda: torch.cdist(w, w))

    def normalise(x):
        return x / x.norm(dim=-1, keepdim=True)  # DIV

    (f,) = _found(audit(lambda: normalise(w), witness=False), normalise, "DIV")
    assert f.hazard == "norm_zero" and "nanguard.normalize" in f.fix


def test_relu_zeros_have_a_selected_zero_gradient_but_a_clamp_passes_it():
    w = torch.nn.Parameter(torch.randn(5))
    _quiet(lambda: torch.relu(w).sqrt())

    def clamped():
        return torch.clamp(w, min=0).sqrt()  # SQRT

    (f,) = _found(audit(clamped, witness=False), clamped, "SQRT")
    assert f.phase == "gradient"


def test_double_where_is_clean_and_a_single_where_has_a_gradient_finding_only_on_the_gradient_path():
    w = torch.nn.Parameter(torch.randn(5))
    _quiet(lambda: nanguard.safe_where(w > 0, torch.log, w).sum())

    def double_where():
        safe = torch.where(w > 0, w, torch.ones_like(w))
        return torch.where(w > 0, torch.log(safe), torch.zeros_like(w)).sum()

    _quiet(double_where)

    def single_where():
        return torch.where(w > 0, torch.log(w), torch.zeros_like(w)).sum()  # WHERE

    (f,) = _found(audit(single_where, witness=False), single_where, "WHERE")
    assert f.hazard == "where_gradient" and f.phase == "gradient" and "nanguard.safe_where" in f.fix
    # the same on data that no gradient reaches: the NaN is dropped in the forward pass, harmless
    _quiet(lambda x: torch.where(x > 0, torch.log(x), torch.zeros_like(x)), torch.rand(5))


def test_rounding_to_float32_reaches_the_log_of_zero():
    def loss(p):
        return torch.log(1 - p.clamp(1e-8, 1 - 1e-8)).sum()  # LOG

    (f,) = _found(audit(loss, torch.rand(4), witness=False), loss, "LOG")
    assert f.range[0] == 0.0
    _quiet(loss, torch.rand(4, dtype=torch.float64))


def test_exact_non_finite_values_that_never_reach_data_are_not_findings():
    def t5_like_buckets(x):
        rel = torch.arange(8)[None, :] - torch.arange(8)[:, None]
        big = torch.log(rel.abs().float() / 2.0).to(torch.long)      # log(0) = -inf, cast, discarded
        bucket = torch.where(rel.abs() < 2, rel.abs(), big)
        return x[:, bucket.clamp(0, 3)].sum()

    _quiet(t5_like_buckets, torch.randn(4, 4))


def test_mask_sentinels_are_real_infinities():
    def causal(scores):
        mask = torch.full((4, 4), float("-inf")).triu(1)
        return torch.softmax(scores + mask, -1)

    _quiet(causal, torch.randn(2, 4, 4))

    def fully_masked(scores):
        mask = torch.tensor([[True, False, True], [False, False, False]])
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)  # SOFTMAX

    (f,) = _found(audit(fully_masked, torch.randn(2, 3), witness=False), fully_masked, "SOFTMAX")
    assert f.hazard == "softmax_masked_row" and f.observed


def test_in_place_writes_through_views_keep_the_base_right():
    w = torch.nn.Parameter(torch.randn(2))

    def risky():
        buf = torch.ones(4)
        buf[:2] = torch.sigmoid(w)
        return torch.log(buf).sum()  # LOG

    (f,) = _found(audit(risky, witness=False), risky, "LOG")
    assert f.hazard == "log_sigmoid" or f.kind == "nonpositive"

    def safe():
        buf = torch.ones(2, 2)
        row = buf[0]
        row.copy_(torch.sigmoid(w) + 1)
        return torch.log(buf.view(4)).sum()

    _quiet(safe)


def test_data_that_arrives_holding_nan_is_reported_where_it_is_first_used():
    def step(model_input):
        lin = torch.nn.Linear(3, 1)
        return lin(model_input).sum()

    x = torch.tensor([[1.0, 2.0, 3.0], [math.nan, 0.0, 1.0]])
    result = audit(step, x, witness=False)
    (f,) = result.findings
    assert f.phase == "input" and f.hazard == "nan_input" and f.observed


def test_safe_ops_are_one_op_and_finite():
    w = torch.nn.Parameter(torch.randn(4, 3))
    mask = torch.tensor([[True, False, True], [False, False, False], [True] * 3, [False, True, False]])
    _quiet(lambda: nanguard.softmax(w, -1, mask=mask).sum() + nanguard.log_softmax(w, -1, mask=mask).sum()
           + nanguard.distance_matrix(w).sum() + nanguard.norm(w, dim=-1).sum() + nanguard.sqrt(w).sum()
           + nanguard.masked_mean(w, mask, dim=-1).sum() + nanguard.softplus(w).sum())


# ------------------------------------------------------------------ modes and options
def test_bounded_mode_finds_float16_matmul_overflow_that_structural_mode_cannot_decide():
    lin = torch.nn.Linear(64, 8).half()

    def forward(x):
        return lin(x)  # MATMUL

    x = torch.rand(2, 64, dtype=torch.float16)
    assert audit(forward, x, witness=False).findings == []
    result = audit(forward, x, mode="bounded", ranges={"x": (0, 100), "params": (-30, 30)})
    (f,) = _found(result, forward, "MATMUL")
    assert f.hazard == "overflow_low_precision" and f.witness is not None
    assert audit(forward, x, mode="bounded", ranges={"x": (0, 1), "params": (-1, 1)},
                 witness=False).findings == []


def test_float16_overflow_under_autocast_keeps_autocast_in_its_fix():
    lin = torch.nn.Linear(64, 8)

    def forward(x):
        with torch.autocast("cpu", dtype=torch.float16):
            return lin(x)  # AUTOCAST

    result = audit(forward, torch.rand(2, 64), mode="bounded", ranges={"x": (0, 100), "params": (-30, 30)},
                   witness=False)
    (f,) = _found(result, forward, "AUTOCAST")
    assert f.hazard == "overflow_mixed_precision" and f.fix.startswith("keep mixed precision")


def test_module_audit_names_parameters_and_ranges_apply_by_module():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Linear(4, 1)

        def forward(self, x):
            return x / self.scale(x)  # DIV

    net = Net()
    result = audit(net, torch.randn(3, 4), witness=False)
    (f,) = _found(result, Net.forward, "DIV")
    assert f.hazard == "div_zero" and f.module == "Net"


def test_bad_arguments_get_clear_errors():
    with pytest.raises(TypeError, match="function or an nn.Module"):
        audit(42)
    with pytest.raises(ValueError, match="mode"):
        audit(lambda: None, mode="wild")
    with pytest.raises(ValueError, match="mode='bounded'"):
        audit(lambda x: x, torch.ones(1), ranges={"x": (0, 1)})
    with pytest.raises(ValueError, match="lo must be <= hi"):
        audit(lambda x: x, torch.ones(1), mode="bounded", ranges={"x": (1, 0)})
    with pytest.raises(TypeError, match="pair of numbers"):
        audit(lambda x: x, torch.ones(1), mode="bounded", ranges={"x": "0..1"})
    with pytest.raises(FileNotFoundError):
        nanguard.audit_script("/no/such/script.py")


def test_every_fix_names_a_hazard_of_the_catalogue():
    from nanguard.core.singular import TABLE
    for entry in TABLE:
        assert entry.hazard in HAZARDS, entry
    import nanguard.torch.auditor.fixes as fixes
    source = inspect.getsource(fixes)
    import re
    for key in set(re.findall(r'return "([a-z_0-9]+)"', source)):
        assert key in HAZARDS, key


def test_every_fix_the_audit_can_give_names_torch_ops_that_exist():
    """The fixes are the catalogue's torch wordings: each `nanguard.x`, `torch.x`, `F.x` in
    them must exist (a fix that names a missing op is worse than none)."""
    import re

    import nanguard.torch as ng_torch
    from nanguard.core.singular import TABLE
    import nanguard.torch.auditor.fixes as fixes

    keys = {entry.hazard for entry in TABLE}
    keys |= set(re.findall(r'return "([a-z_0-9]+)"', inspect.getsource(fixes)))
    keys |= {"where_gradient", "nan_input", "overflow", "overflow_low_precision"}
    for key in sorted(keys):
        text = HAZARDS[key].fix_text("torch")
        for name in re.findall(r"\bnanguard\.([a-z_]+)\(", text):
            assert hasattr(ng_torch, name), (key, name)
        for module, name in re.findall(r"\b(torch|torch\.nn\.functional|F|torch\.special)\.([a-z_0-9]+)\(", text):
            owner = {"torch": torch, "F": F, "torch.nn.functional": F, "torch.special": torch.special}[module]
            assert hasattr(owner, name), (key, module, name)
