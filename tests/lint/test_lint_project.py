"""Facts gathered over the whole linted tree (`nanguard.lint.project`): causal-mask classes.

Informer's attention (copied into Time-Series-Library, neuralforecast, PatchTST, FEDformer) fills
`-inf` through a `ProbMask` defined in another file; every row of it keeps its diagonal, so the
softmax never sees a fully masked row. A mask passed in by the caller still can.
"""

from __future__ import annotations

import textwrap

import pytest

from nanguard.lint import lint_source, project
from nanguard.lint.cli import main

MASKING = textwrap.dedent("""\
    import torch


    class TriangularCausalMask():
        def __init__(self, B, L, device="cpu"):
            self._mask = torch.triu(torch.ones([B, 1, L, L], dtype=torch.bool), diagonal=1).to(device)

        @property
        def mask(self):
            return self._mask


    class ProbMask():
        def __init__(self, B, H, L, index, scores, device="cpu"):
            _mask = torch.ones(L, scores.shape[-1], dtype=torch.bool).to(device).triu(1)
            _mask_ex = _mask[None, None, :].expand(B, H, L, scores.shape[-1])
            self._mask = _mask_ex[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :]

        @property
        def mask(self):
            return self._mask


    class PaddedCausalMask():
        def __init__(self, L, lengths):
            self._mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1) | (torch.arange(L) >= lengths[:, None])
""")

ATTENTION = textwrap.dedent("""\
    import numpy as np
    import torch
    from utils.masking import TriangularCausalMask, ProbMask


    class ProbAttention(torch.nn.Module):
        def _update_context(self, context_in, V, scores, index, L_Q, attn_mask):
            if self.mask_flag:
                attn_mask = ProbMask(V.shape[0], V.shape[1], L_Q, index, scores, device=V.device)
                scores.masked_fill_(attn_mask.mask, -np.inf)
            return torch.softmax(scores, dim=-1)


    class FullAttention(torch.nn.Module):
        def forward(self, scores, attn_mask):
            if attn_mask is None:
                attn_mask = TriangularCausalMask(scores.shape[0], scores.shape[-1], device=scores.device)
            scores.masked_fill_(attn_mask.mask, -np.inf)
            return torch.softmax(scores, dim=-1)
""")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "masking.py").write_text(MASKING)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "attn.py").write_text(ATTENTION)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _ng701_lines(capsys, *argv) -> list[int]:
    main(["--exit-zero", *argv])
    out = capsys.readouterr().out
    return [int(line.split(":")[1]) for line in out.splitlines() if ": NG701 " in line]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_causal_mask_class_of_another_file_keeps_every_row(tree, capsys, jobs):
    # ProbMask (softmax on line 11) builds triu rows: not reported. A mask given by a caller in
    # another module may still empty a row (line 19), where the layer itself, given None, builds a
    # causal mask: possible (the Informer family's attention, README).
    assert _ng701_lines(capsys, "-j", jobs, ".") == []
    assert _ng701_lines(capsys, "-j", jobs, "--confidence", "all", ".") == [19]


def test_without_the_mask_file_the_class_is_unknown(tree, capsys):
    # Linting the attention file alone: ProbMask's body is not in view, the finding stays.
    assert _ng701_lines(capsys, "-j", "1", "models/attn.py") == [11]
    assert _ng701_lines(capsys, "-j", "1", "--confidence", "all", "models/attn.py") == [11, 19]
    assert project.causal_mask_classes() == frozenset()  # nothing left over for lint_source


def test_gather_reads_the_classes_from_text(tree):
    # PaddedCausalMask takes lengths: a padded row can be empty, so it does not count.
    facts = project.gather([str(tree / "utils" / "masking.py")])
    assert facts.causal_mask_classes == {"TriangularCausalMask", "ProbMask"}


def test_a_causal_mask_class_in_the_same_file_is_read_from_its_tree():
    source = MASKING + ATTENTION.replace("from utils.masking import TriangularCausalMask, ProbMask, PaddedCausalMask\n", "")
    lines = [f.line for f in lint_source(source, confidence="all") if f.code == "NG701"]
    softmaxes = [i for i, line in enumerate(source.splitlines(), 1) if "return torch.softmax" in line]
    assert lines == [softmaxes[1]]  # FullAttention's, over the caller's mask; not ProbAttention's
    assert [f.code for f in lint_source(source, confidence="certain") if f.code == "NG701"] == []


SABS = "import torch\n\n\n@torch.jit.script\ndef sabs(x, eps: float = 1e-15):\n    return x.abs().add_(eps)\n"
PROJECT = """\
import torch
from geo.utils import sabs


def _project(x, k, eps: float = 4e-3):
    maxnorm = (1 - eps) / (sabs(k) ** 0.5)
    return torch.where(k.lt(0), maxnorm, k.new_full((), 1e15))
"""


@pytest.fixture
def geo(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "geo").mkdir()
    (tmp_path / "geo" / "utils.py").write_text(SABS)
    (tmp_path / "geo" / "math.py").write_text(PROJECT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _ng501_count(capsys, *argv) -> int:
    main(["--exit-zero", *argv])
    return capsys.readouterr().out.count(": NG501 ")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_positive_helper_of_another_file_guards_the_division(geo, capsys, jobs):
    # geoopt's `sabs(k) = |k| + eps` never reaches 0: the where's discarded branch is finite.
    assert _ng501_count(capsys, "-j", jobs, ".") == 0


def test_without_the_helper_file_the_division_is_reported(geo, capsys):
    assert _ng501_count(capsys, "-j", "1", "geo/math.py") == 1
    assert project.positive_helpers() == frozenset()


def test_a_helper_name_defined_twice_counts_only_if_both_are_positive(tmp_path):
    (tmp_path / "a.py").write_text(SABS)
    (tmp_path / "b.py").write_text("def sabs(x):\n    return x.abs()\n")
    (tmp_path / "c.py").write_text('def softclip(x):\n    """Floor."""\n    return torch.clamp(x, min=1e-6)\n')
    facts = project.gather([str(tmp_path / n) for n in ("a.py", "b.py", "c.py")])
    assert facts.positive_helpers == {"softclip"}
    assert project.gather([str(tmp_path / "a.py")]).positive_helpers == {"sabs"}


@pytest.mark.parametrize("ret,positive", [
    ("x.abs().add_(eps)", True), ("x.abs() + 1e-8", True), ("torch.sqrt(x) + eps", True),
    ("x.clamp_min(1e-6)", True), ("x.clamp(min=eps)", True), ("jnp.maximum(x, 1e-12)", True),
    ("torch.clamp(x, 1e-6, 1.0)", True), ("x + eps", False), ("x.add_(eps)", False), ("x.clamp(max=1.0)", False),
    ("x.clamp_min(0)", False), ("torch.clamp(x, -1.0, 1.0)", False), ("x.abs()", False),
    ("max(torch.prod(torch.tensor(t.size()[1:]).float()).item(), 1.0)", True), ("max(n, 0)", False),
    ("max(a, b)", False),
])
def test_what_a_positive_helper_returns(ret, positive):
    import ast

    from nanguard.lint.positive import positive_helper_return
    assert positive_helper_return(ast.parse(ret, mode="eval").body) is positive


def test_a_positive_helper_in_the_same_file_is_read_from_its_tree():
    source = SABS + PROJECT.replace("from geo.utils import sabs\n", "")
    assert [f.code for f in lint_source(source, confidence="all")] == []
    unbounded = source.replace("x.abs().add_(eps)", "x.abs()")
    assert "NG501" in [f.code for f in lint_source(unbounded)]
