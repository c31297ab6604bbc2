"""Every public op documents its formula, its singular-point convention and a working example."""

from __future__ import annotations

import doctest
import importlib

import pytest
import torch

import nanguard
from nanguard.torch.ops import __all__ as OPS

MODULES = sorted({getattr(nanguard, name).__module__ for name in OPS})


@pytest.mark.parametrize("name", OPS)
def test_docstring_states_formula_convention_and_example(name: str) -> None:
    doc = getattr(nanguard, name).__doc__ or ""
    assert ".. math::" in doc, f"{name}: no formula"
    assert "Singular points:" in doc or "Conventions:" in doc, f"{name}: no singular-point convention"
    assert "Example:" in doc and ">>>" in doc, f"{name}: no example"


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run_and_print_what_they_claim(module: str) -> None:
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, extraglobs={"torch": torch, "nanguard": nanguard}, report=True,
                             optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring example(s) in {module} failed (see output)"


def test_package_exports_every_op_lazily_and_completely() -> None:
    import subprocess
    import sys

    code = ("import sys, nanguard; assert 'torch' not in sys.modules, 'import nanguard loaded torch'; "
            "import nanguard.torch; import nanguard.torch.ops as ops; "
            "assert sorted(ops.__all__) == sorted(n for n in nanguard.__all__ "
            "if getattr(nanguard, n).__module__.startswith('nanguard.torch.ops')); "
            "assert sorted(nanguard.__all__) == sorted(nanguard.torch.__all__); "
            "assert all(getattr(nanguard, n) is getattr(nanguard.torch, n) for n in nanguard.__all__); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_contract_catalogue_names_exactly_the_torch_ops() -> None:
    from nanguard.core.vectors import OPS as CONTRACT_OPS

    assert sorted(CONTRACT_OPS) == sorted(OPS)
