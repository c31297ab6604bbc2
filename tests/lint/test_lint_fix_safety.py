"""`--fix` is always safe: it never writes a name the file shadows, never rewrites the function
that implements the replacement or a test's reference formula, and `--fix -` is a clean filter.

Every rewrite here is executed: a fix that compiles but crashes at run time is the bug.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from nanguard.lint import fix_source, lint_source

REPO = Path(__file__).resolve().parents[2]
HEADER = "import torch\nimport torch.nn.functional as F\n"


def _function(source: str, name: str):
    env: dict = {}
    exec(compile(source, "<source>", "exec"), env)  # noqa: S102  (running the fixed code is the test)
    return env[name]


SHADOWED = [
    # `F` is a shape component here, not torch.nn.functional.
    ("def f(spec):\n    B, T, F = spec.shape\n    return torch.log(torch.sigmoid(spec))\n", "f"),
    # A parameter named `F`.
    ("def f(spec, F=3):\n    return torch.log(torch.sigmoid(spec))\n", "f"),
    # A module-level rebinding after the import.
    ("F = None\ndef f(spec):\n    return torch.log(torch.sigmoid(spec))\n", "f"),
    # `global F` in the function, assigned there.
    ("def f(spec):\n    global F\n    F = 1\n    return torch.log(1 - torch.sigmoid(spec))\n", "f"),
]


@pytest.mark.parametrize("body,fn", SHADOWED)
def test_fix_never_writes_a_shadowed_name(body, fn):
    source = HEADER + body
    fixed, applied, remaining = fix_source(source)
    assert applied == 1 and remaining == []
    assert "F.logsigmoid" not in fixed and "torch.nn.functional.logsigmoid" in fixed
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(_function(fixed, fn)(x), _function(source, fn)(x), rtol=1e-12, atol=1e-12)


def test_no_fix_when_the_only_spelling_is_shadowed():
    source = "import torch.nn.functional as F\nfrom torch import log, sigmoid\n" \
             "def f(x, F):\n    return log(sigmoid(x))\n"
    [finding] = lint_source(source)
    assert finding.code == "NG102" and finding.fix is None
    assert fix_source(source)[0] == source


def test_unshadowed_name_is_still_used():
    fixed, applied, _ = fix_source(HEADER + "y = torch.log(torch.sigmoid(x))\n")
    assert applied == 1 and fixed.endswith("y = F.logsigmoid(x)\n")


def test_no_rewrite_inside_the_function_that_implements_the_replacement():
    # torch/_refs style: rewriting logsumexp's own body to call torch.logsumexp recurses forever.
    source = HEADER + textwrap.dedent("""\
        def logsumexp(a, dim):
            return torch.log(torch.sum(torch.exp(a), dim))

        def log_softmax(a, dim):
            return torch.log(torch.softmax(a, dim))
    """)
    findings = lint_source(source)
    assert [f.code for f in findings] == ["NG105", "NG101"]
    assert all(f.fix is None for f in findings)
    assert fix_source(source)[1] == 0


@pytest.mark.parametrize("path", ["tests/test_ops.py", "pkg/ops_test.py", "test_sigmoid.py", "pkg/tests/util.py"])
def test_no_rewrite_in_test_code(path):
    # `i.sigmoid().log()` is the oracle the library's logsigmoid is tested against.
    source = HEADER + "expected = i.sigmoid().log()\n"
    [finding] = lint_source(source, path=path)
    assert finding.code == "NG102" and finding.fix is None
    assert fix_source(source, path=path)[1] == 0


@pytest.mark.parametrize("fn", ["test_logsigmoid", "reference_logsigmoid", "logsigmoid_ref", "naive_impl"])
def test_no_rewrite_in_a_test_or_reference_function(fn):
    source = HEADER + f"def {fn}(i):\n    return i.sigmoid().log()\n"
    assert fix_source(source, path="lib/ops.py")[1] == 0


def test_rewrite_outside_those_contexts_still_happens():
    source = HEADER + "def loss(i):\n    return i.sigmoid().log()\n"
    fixed, applied, _ = fix_source(source, path="lib/ops.py")
    assert applied == 1 and "F.logsigmoid(i)" in fixed


def _cli(args: list[str], stdin: str) -> subprocess.CompletedProcess:
    # A bare `nanguard` namespace: the linter's CLI alone, without the package's torch import.
    code = textwrap.dedent(f"""
        import sys, types
        pkg = types.ModuleType("nanguard")
        pkg.__path__ = [{str(REPO / "nanguard")!r}]
        sys.modules["nanguard"] = pkg
        from nanguard.lint.cli import main
        sys.exit(main({args!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, check=False)


def test_fix_stdin_writes_only_the_fixed_code_to_stdout():
    source = HEADER + "y = torch.log(torch.sigmoid(x))\nz = torch.log1p(torch.exp(x))\n"
    proc = _cli(["--fix", "-"], source)
    assert proc.stdout == HEADER + "y = F.logsigmoid(x)\nz = torch.log1p(torch.exp(x))\n"
    compile(proc.stdout, "<stdout>", "exec")
    assert "NG104" in proc.stderr and "fixed" in proc.stderr  # the messages, on stderr
    assert proc.returncode == 1  # NG104 remains


def test_fix_stdin_with_nothing_to_fix_echoes_the_input():
    source = "import torch\ny = torch.log_softmax(x, 1)\n"
    proc = _cli(["--fix", "-"], source)
    assert proc.stdout == source and proc.returncode == 0
