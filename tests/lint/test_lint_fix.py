"""`--fix`: exact rewrites that parse, silence the rule, keep comments, and compute the same values."""

from __future__ import annotations

import ast
import math

import pytest
import torch
import torch.nn.functional as F

from nanguard.lint import fix_source, lint_source

HEADER = "import torch\nimport torch.nn.functional as F\n"

# (original expression, expected fixed expression). `x` is a 2-D tensor of logits.
TORCH_FIXES = [
    ("torch.log(torch.softmax(x, dim=1))", "torch.log_softmax(x, dim=1)"),
    ("torch.log(F.softmax(x, -1))", "F.log_softmax(x, -1)"),
    ("F.softmax(x, dim=-1).log()", "F.log_softmax(x, dim=-1)"),
    ("x.softmax(1).log()", "x.log_softmax(1)"),
    ("torch.log(x.softmax(dim=0))", "x.log_softmax(dim=0)"),
    ("torch.log(torch.special.softmax(x, 1))", "torch.special.log_softmax(x, 1)"),
    ("torch.log(torch.sigmoid(x))", "F.logsigmoid(x)"),
    ("x.sigmoid().log()", "F.logsigmoid(x)"),
    ("torch.log(torch.sigmoid(x * 2 + 1))", "F.logsigmoid(x * 2 + 1)"),
    ("torch.log(1 - torch.sigmoid(x))", "F.logsigmoid(-x)"),
    ("torch.log(1.0 - torch.sigmoid(x + 1))", "F.logsigmoid(-(x + 1))"),
    ("torch.log1p(-x.sigmoid())", "F.logsigmoid(-x)"),
    ("(1 - x.sigmoid()).log()", "F.logsigmoid(-x)"),
    ("torch.log(torch.sum(torch.exp(x), dim=1))", "torch.logsumexp(x, dim=1)"),
    ("torch.log(torch.sum(torch.exp(x), 1, keepdim=True))", "torch.logsumexp(x, 1, keepdim=True)"),
    ("torch.log(torch.exp(x).sum(-1))", "torch.logsumexp(x, -1)"),
    ("x.exp().sum(-1).log()", "x.logsumexp(-1)"),
    ("(x * 2).exp().sum(0).log()", "(x * 2).logsumexp(0)"),
]


@pytest.mark.parametrize("before,after", TORCH_FIXES)
def test_fix_rewrites_exactly_and_preserves_values(before, after):
    source = HEADER + f"y = {before}\n"
    fixed, applied, remaining = fix_source(source)
    assert applied == 1
    assert fixed == HEADER + f"y = {after}\n"
    ast.parse(fixed)
    assert remaining == [] and lint_source(fixed) == []
    # The rewrite computes the same function: equal on moderate inputs...
    x = torch.randn(4, 5, dtype=torch.float64)
    env_before, env_after = {"torch": torch, "F": F, "x": x}, {"torch": torch, "F": F, "x": x}
    exec(compile(source, "<before>", "exec"), env_before)  # noqa: S102  (running the fixed code is the test)
    exec(compile(fixed, "<after>", "exec"), env_after)  # noqa: S102  (running the fixed code is the test)
    torch.testing.assert_close(env_after["y"], env_before["y"], rtol=1e-12, atol=1e-12)
    # ...and finite where the original under/overflows.
    big = torch.tensor([[-800.0, 0.0, 800.0]], dtype=torch.float64)
    env_after["x"] = big
    exec(compile(fixed, "<after>", "exec"), env_after)  # noqa: S102  (running the fixed code is the test)
    assert torch.isfinite(env_after["y"]).all()


def test_fix_keeps_comments_and_layout_elsewhere():
    source = HEADER + (
        "def f(x):\n"
        "    # leading comment\n"
        "    p = torch.log(torch.softmax(x,   dim=1))  # trailing comment\n"
        "\n"
        "    return p  # done\n"
    )
    fixed, applied, _ = fix_source(source)
    assert applied == 1
    assert fixed == source.replace("torch.log(torch.softmax(x,   dim=1))", "torch.log_softmax(x,   dim=1)")


def test_fix_refuses_to_delete_a_comment():
    source = HEADER + (
        "p = torch.log(  # why\n"
        "    torch.softmax(x, dim=1)\n"
        ")\n"
    )
    fixed, applied, remaining = fix_source(source)
    assert applied == 0 and fixed == source
    assert [f.code for f in remaining] == ["NG101"]
    assert remaining[0].fix is None


def test_multiline_argument_text_is_kept_verbatim():
    source = HEADER + (
        "p = torch.log(torch.softmax(\n"
        "    x,  # the logits\n"
        "    dim=1,\n"
        "))\n"
    )
    fixed, applied, _ = fix_source(source)
    assert applied == 1
    assert fixed == HEADER + "p = torch.log_softmax(\n    x,  # the logits\n    dim=1,\n)\n"


def test_nested_fixes_need_two_passes_and_both_apply():
    source = HEADER + "y = torch.log(torch.softmax(x, 1)) + torch.log(torch.sigmoid(torch.log(torch.softmax(z, 0))))\n"
    fixed, applied, remaining = fix_source(source)
    assert applied == 3
    assert "torch.log_softmax(x, 1)" in fixed and "F.logsigmoid(torch.log_softmax(z, 0))" in fixed
    assert remaining == []


def test_no_fix_through_a_name_or_without_an_importable_module():
    through_name = HEADER + "def f(x):\n    p = torch.softmax(x, 1)\n    return torch.log(p)\n"
    fixed, applied, remaining = fix_source(through_name)
    assert applied == 0 and [f.code for f in remaining] == ["NG101"]
    # `from torch import log, sigmoid`: no module spelling for torch.nn.functional exists.
    bare = "from torch import log, sigmoid\ny = log(sigmoid(x))\n"
    fixed, applied, remaining = fix_source(bare)
    assert applied == 0 and fixed == bare and [f.code for f in remaining] == ["NG102"]


def test_logsigmoid_fix_uses_the_files_own_spelling():
    only_torch = "import torch\ny = torch.log(torch.sigmoid(x))\n"
    fixed, _applied, _ = fix_source(only_torch)
    assert fixed == "import torch\ny = torch.nn.functional.logsigmoid(x)\n"
    aliased = "import torch as th\nfrom torch.nn import functional as fn\ny = th.log(th.sigmoid(x))\n"
    fixed, _, _ = fix_source(aliased)
    assert fixed.endswith("y = fn.logsigmoid(x)\n")


def test_logsumexp_fix_needs_a_dim_and_plain_sum():
    for source in (HEADER + "y = torch.log(torch.sum(torch.exp(x)))\n",
                   HEADER + "y = torch.log(torch.sum(torch.exp(x), 1, dtype=torch.float64))\n",
                   HEADER + "y = torch.log(torch.nansum(torch.exp(x), 1))\n",
                   HEADER + "y = torch.log(torch.mean(torch.exp(x), 1))\n"):
        fixed, applied, remaining = fix_source(source)
        assert applied == 0 and fixed == source
        assert [f.code for f in remaining] == ["NG105"]


def test_tensorflow_fixes():
    source = ("import tensorflow as tf\n"
              "a = tf.math.log(tf.nn.softmax(x, axis=-1))\n"
              "b = tf.math.log(tf.reduce_sum(tf.exp(x), axis=1, keepdims=True))\n"
              "c = tf.math.log(tf.sigmoid(x))\n"
              "d = tf.math.log(1. - tf.math.sigmoid(x))\n")
    fixed, applied, remaining = fix_source(source)
    assert applied == 4 and remaining == []
    assert fixed == ("import tensorflow as tf\n"
                     "a = tf.nn.log_softmax(x, axis=-1)\n"
                     "b = tf.reduce_logsumexp(x, axis=1, keepdims=True)\n"
                     "c = tf.math.log_sigmoid(x)\n"
                     "d = tf.math.log_sigmoid(-x)\n")


def test_unfixable_rules_have_no_fix():
    source = HEADER + "y = torch.log1p(torch.exp(x))\nd = torch.sqrt(a + b - 2 * a @ b.T)\n"
    findings = lint_source(source)
    assert {f.code for f in findings} == {"NG104", "NG301"}
    assert all(f.fix is None for f in findings)


def test_crlf_and_non_ascii_survive_a_fix():
    source = "import torch\r\n# é ü — unicode before\r\ny = 'é' + str(torch.log(torch.softmax(x, 1)))\r\n"
    fixed, applied, _ = fix_source(source)
    assert applied == 1
    assert fixed == source.replace("torch.log(torch.softmax(x, 1))", "torch.log_softmax(x, 1)")


def test_fixed_values_match_math_on_a_known_point():
    # log(1 - sigmoid(x)) == logsigmoid(-x) exactly in real arithmetic; check one value by hand.
    x = torch.tensor(0.3, dtype=torch.float64)
    assert math.isclose(F.logsigmoid(-x).item(), math.log(1 - 1 / (1 + math.exp(-0.3))), rel_tol=1e-12)
