"""Bad input never crashes the linter, and positions stay right in awkward files."""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nanguard.lint import lint_source
from nanguard.lint.checker import check_source
from nanguard.lint.runner import module_name


def test_syntax_error_position():
    [f] = lint_source("import torch\nx = (1,\n")
    assert f.code == "NG001" and f.line == 2 and "SyntaxError" in f.message


def test_null_byte_and_undecodable_bytes_are_findings():
    [f] = check_source(b"import torch\x00\n", "nul.py")
    assert f.code == "NG001" and f.line == 1
    [g] = check_source(b"x = '\xff\xfe'\n", "bad_utf8.py")
    assert g.code == "NG001"


def test_too_deep_nesting_is_a_finding():
    deep = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"
    assert [f.code for f in lint_source(deep)] == ["NG001"]
    # A long left-leaning chain: deep for the walk, which is iterative...
    chain = "import torch\nx = " + " + ".join(["torch.log(torch.softmax(a, 1))"] * 800) + "\n"
    findings = lint_source(chain)
    assert len(findings) == 800 and {f.code for f in findings} == {"NG101"}
    # ...and one too deep for CPython's own parser is a finding, not a crash.
    too_deep = "x = " + " + ".join(["a"] * 100000) + "\n"
    assert [f.code for f in lint_source(too_deep)] == ["NG001"]


def test_syntax_errors_can_be_ignored():
    assert check_source("def f(:\n", "x.py", enabled={"NG101"}) == []


def test_empty_and_comment_only_files():
    assert lint_source("") == []
    assert lint_source("# just a comment\n\n") == []


def test_lines_and_columns_with_crlf_form_feed_and_unicode():
    source = ("import torch\r\n"
              "\x0c\r\n"                       # a form feed is not a line break for Python
              "s = 'ééé'; y = torch.log(torch.softmax(x, 1))\r\n")
    [f] = lint_source(source)
    assert (f.line, f.col) == (3, 16)        # character column, 1-based
    assert source.split("\r\n")[2][f.col - 1:].startswith("torch.log(")


def test_latin1_coding_cookie():
    data = "# -*- coding: latin-1 -*-\nimport torch\nn = 'ñ'; y = torch.log(torch.sigmoid(x))\n".encode("latin-1")
    [f] = check_source(data, "l1.py")
    assert (f.code, f.line, f.col) == ("NG102", 3, 14)


def test_relative_imports_resolve_with_a_module_name():
    source = "from .. import functional as F\nfrom ..functional import sigmoid\ny = F.softmax(x, 1).log()\nz = sigmoid(x).log()\n"
    assert [f.code for f in check_source(source, "m.py", module="torch.nn.modules.activation")] == [
        "NG101", "NG102"]
    assert check_source(source, "m.py") == []  # without a module name the imports are unknown


def test_module_name_from_package_layout(tmp_path):
    pkg = tmp_path / "proj" / "pkg" / "sub"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "proj" / "pkg", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("")
    assert module_name(pkg / "mod.py") == ("pkg.sub.mod", False)
    assert module_name(pkg / "__init__.py") == ("pkg.sub", True)
    assert module_name(tmp_path / "loose.py") == ("loose", False)


IMPORT_SPELLINGS = [
    "import torch\ny = torch.log(torch.softmax(x, 1))",
    "import torch as th\ny = th.log(th.softmax(x, 1))",
    "from torch import log, softmax\ny = log(softmax(x, 1))",
    "from torch import log as ln\nfrom torch.nn.functional import softmax as sm\ny = ln(sm(x, 1))",
    "import torch.nn.functional\nimport torch\ny = torch.nn.functional.softmax(x, 1).log()",
    "from torch.nn import functional as fn\ny = fn.softmax(x, dim=1).log()",
    "import tensorflow.compat.v1 as tf\ny = tf.log(tf.nn.softmax(x))",
    "import tensorflow as tf\ny = tf.compat.v1.log(tf.compat.v1.nn.softmax(x))",
    "from tensorflow import math as tfm, nn\ny = tfm.log(nn.softmax(x))",
    "from tensorflow.keras import backend as K\ny = K.log(K.softmax(x))",
    "import keras\ny = keras.ops.log(keras.ops.softmax(x))",
    "def f(x):\n    import torch\n    return torch.log(torch.softmax(x, 1))",
]


def test_import_spellings_resolve():
    for source in IMPORT_SPELLINGS:
        assert [f.code for f in lint_source(source + "\n")] == ["NG101"], source


NOT_TORCH = [
    "y = torch.log(torch.softmax(x, 1))",                 # `torch` never imported
    "import numpy as torch\ny = torch.log(torch.softmax(x, 1))",
    "import math\ny = math.log(softmax(x))",
    "import torch\ny = logger.log(torch.softmax(x, 1))",   # a method with an argument is not Tensor.log
    "import torch\ny = x.softmax().log()",                 # softmax without dim is not torch's
    "import jax.numpy as jnp\ny = jnp.log(jnp.softmax(x))",    # jax.numpy has no softmax (jax.nn has)
    # Method forms count only in files that import a tensor framework (Decimal, sympy...).
    "from decimal import Decimal\nz = (Decimal(x) ** 2 + Decimal(y) ** 2).sqrt()",
    "import sympy\ns = q.norm() ** -2\nt = e.exp().log1p()",
]


def test_unresolved_names_do_not_match():
    for source in NOT_TORCH:
        assert [f.code for f in lint_source(source + "\n")] == [], source


def test_class_scope_is_not_visible_from_methods():
    source = ("import torch\n"
              "class M:\n"
              "    p = torch.softmax(w, 1)\n"
              "    def f(self, p):\n"
              "        return torch.log(p)\n")
    assert lint_source(source) == []


_ATOMS = ["x", "y", "mask", "p", "0", "1", "2", "0.5", "1e-8", "eps", "float('-inf')", "x.sum(-1)", "len(x)"]
_FUNCS = ["torch.log", "torch.exp", "torch.sqrt", "torch.softmax", "F.softmax", "torch.sigmoid", "torch.log1p",
          "torch.acos", "torch.abs", "tf.math.log", "tf.nn.softmax", "tf.reduce_sum", "torch.clamp",
          "torch.sum", "torch.where", "torch.std", "torch.pow", "x.masked_fill", "torch.nan_to_num"]
_METHODS = [".log()", ".exp()", ".sqrt()", ".sum(-1)", ".softmax(-1)", ".sigmoid()", ".log1p()", ".std(0)",
            ".clamp(min=1e-6)", ".pow(0.5)", ".acos()", ".float()"]
_BINOPS = [" + ", " - ", " * ", " / ", " ** ", " @ "]


def _expressions():
    atom = st.sampled_from(_ATOMS)

    def extend(inner):
        return st.one_of(
            st.tuples(st.sampled_from(_FUNCS), st.lists(inner, min_size=1, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, st.sampled_from(_METHODS)).map(lambda t: f"({t[0]}){t[1]}"),
            st.tuples(inner, st.sampled_from(_BINOPS), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
            inner.map(lambda e: f"-{e}"),
        )

    return st.recursive(atom, extend, max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs=st.lists(_expressions(), min_size=1, max_size=4), nograd=st.booleans())
def test_random_tensor_programs_never_crash(exprs, nograd):
    body = "".join(f"    v{i} = {e}\n" for i, e in enumerate(exprs))
    if nograd:
        body = "    with torch.no_grad():\n" + body.replace("\n    ", "\n        ").replace("    v0", "        v0", 1)
    source = ("import torch\nimport torch.nn.functional as F\nimport tensorflow as tf\n\n"
              f"def f(x, y, mask, p, eps):\n{body}    return 0\n")
    ast.parse(source)
    findings = lint_source(source)
    n_lines = source.count("\n")
    for f in findings:
        assert f.code != "NG001"
        assert 1 <= f.line <= f.end_line <= n_lines and f.col >= 1
        if f.fix is not None:
            from nanguard.lint.fixes import apply_edits
            ast.parse(apply_edits(source, f.fix.edits))  # every offered fix parses


def test_package_docstring_example_runs():
    import doctest

    import nanguard.lint

    result = doctest.testmod(nanguard.lint)
    assert result.attempted >= 1 and result.failed == 0


def test_torch_max_with_an_int_is_a_reduction_not_a_guard():
    from nanguard.lint.analysis import Analysis
    from nanguard.lint.names import ImportMap
    from nanguard.lint.positive import guarded_positive

    tree = ast.parse("import torch\na = torch.max(n, 1)\nb = torch.max(n, torch.tensor(1.0))\n")
    ctx = Analysis(tree, ImportMap())
    a, b = tree.body[1].value, tree.body[2].value
    assert not guarded_positive(ctx, a)
    assert guarded_positive(ctx, b)



def test_an_in_process_run_gives_the_cyclic_collector_back(tmp_path):
    # The run disables the collector between its own collections; the caller's setting comes
    # back, and the findings are those of the file.
    import gc

    from nanguard.lint.rules import RULES
    from nanguard.lint.runner import Task, run_tasks

    path = tmp_path / "m.py"
    path.write_text("import torch\ndef f(x, mask):\n    return x.sum() / mask.sum()\n")
    task = Task(path=str(path), display="m.py", enabled=frozenset(RULES))
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            results = run_tasks([task], 1)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert [f.code for f in results[0].findings] == ["NG401"]
