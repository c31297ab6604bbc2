"""The conventions ruff users expect: CI output formats, statistics as JSON, --force-exclude,
notebooks and stubs, newer syntax on an older Python, Latin-1 files, an honest "no files"."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nanguard.lint import lint_source
from nanguard.lint.cli import main

REPO = Path(__file__).resolve().parents[2]
# a certain finding (NG101) and a possible one (NG301 on an elementwise law of cosines)
BAD = "import torch\ny = torch.log(torch.softmax(x, 1))\nz = torch.sqrt(a ** 2 + b ** 2 - 2 * a * b * torch.cos(g))\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    return tmp_path


def run(capsys, *argv):
    status = main(["--isolated", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_github_annotations(project, capsys):
    status, out, _ = run(capsys, "--output-format", "github", "--confidence", "all", "bad.py")
    lines = out.splitlines()
    assert status == 1 and len(lines) == 2
    assert lines[0].startswith("::error title=nanguard (NG101),file=bad.py,line=2,col=5,endLine=2,endColumn=35::")
    assert lines[1].startswith("::warning title=nanguard (NG301),file=bad.py,line=3,")  # possible: a warning


def test_format_is_an_alias_of_output_format(project, capsys):
    assert run(capsys, "--format", "github", "bad.py")[1] == run(capsys, "--output-format", "github", "bad.py")[1]


def test_sarif_log(project, capsys):
    status, out, _ = run(capsys, "--output-format", "sarif", "bad.py")
    log = json.loads(out)
    assert status == 1 and log["version"] == "2.1.0"
    run_ = log["runs"][0]
    assert run_["tool"]["driver"]["name"] == "nanguard"
    assert [r["id"] for r in run_["tool"]["driver"]["rules"]] == ["NG101"]
    [result] = run_["results"]
    assert result["ruleId"] == "NG101" and result["level"] == "error"
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "bad.py" and loc["region"]["startLine"] == 2
    assert "log_softmax" in result["message"]["text"]


def test_junit_xml(project, capsys):
    status, out, _ = run(capsys, "--output-format", "junit", "--confidence", "all", "bad.py")
    root = ET.fromstring(out)
    assert status == 1 and root.tag == "testsuites" and root.get("failures") == "2"
    [suite] = root
    assert suite.get("name") == "bad.py"
    cases = list(suite)
    assert [c.get("name") for c in cases] == ["nanguard.NG101", "nanguard.NG301"]
    assert cases[0][0].tag == "failure" and "line 2, col 5" in cases[0][0].text


def test_statistics_as_json(project, capsys):
    status, out, _ = run(capsys, "--statistics", "--output-format", "json", "--confidence", "all", "bad.py")
    assert status == 1
    assert json.loads(out) == [{"code": "NG101", "name": "log-of-softmax", "count": 1, "fixable": True},
                               {"code": "NG301", "name": "sqrt-of-gram-expansion", "count": 1, "fixable": False}]


def test_force_exclude_applies_to_named_files(project, capsys):
    (project / "vendor").mkdir()
    (project / "vendor" / "v.py").write_text(BAD)
    assert run(capsys, "--extend-exclude", "vendor", "vendor/v.py")[0] == 1   # named: linted
    status, _, err = run(capsys, "--extend-exclude", "vendor", "--force-exclude", "vendor/v.py")
    assert status == 0 and "No Python files found" in err


def test_no_python_files_is_said_not_all_checks_passed(project, capsys):
    (project / "empty").mkdir()
    status, out, err = run(capsys, "empty")
    assert status == 0 and "All checks passed" not in out and "No Python files found" in err


def _notebook(cells) -> str:
    return json.dumps({"cells": [{"cell_type": t, "source": s, "metadata": {}} for t, s in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_notebook_code_cells_with_lines_per_cell(project, capsys):
    (project / "nb.ipynb").write_text(_notebook([
        ("markdown", ["# title\n"]),
        ("code", ["import torch\n", "%matplotlib inline\n", "!pip install x\n"]),
        ("code", "def broken(:\n"),
        ("code", ["a = 1\n", "y = torch.log(torch.softmax(x, 1))\n"]),
    ]))
    status, out, _ = run(capsys, "-q", "nb.ipynb")
    assert status == 1
    assert out.splitlines()[0].startswith("nb.ipynb:cell 3:1:")  # the cell that does not parse
    assert out.splitlines()[1].startswith("nb.ipynb:cell 4:2:5: NG101")
    status, out, _ = run(capsys, "--output-format", "json", "nb.ipynb")
    assert [(i["code"], i["cell"], i["location"]["row"]) for i in json.loads(out)] == [("NG001", 3, 1),
                                                                                      ("NG101", 4, 2)]


def test_notebook_magics_keep_blocks_and_lines(project, capsys):
    """A magic is read as Python of the same shape: a block whose body is a magic still
    parses, `x = !ls` is an assignment, a %%bash cell is not Python, %%time's body is."""
    (project / "nb.ipynb").write_text(_notebook([
        ("code", ["import torch\n", "if True:\n", "    !pip install x \\\n", "        y\n"]),
        ("code", ["files = !ls\n", "t = %timeit -o f()\n", "y = torch.log(torch.softmax(x, 1))\n"]),
        ("code", ["%%bash\n", "echo $((1 + ))\n", "if [ -f x ]; then ls; fi\n"]),
        ("code", ["%%time\n", "z = torch.log(torch.softmax(x, 1))\n"]),
    ]))
    status, out, _ = run(capsys, "--output-format", "json", "nb.ipynb")
    assert status == 1
    assert [(i["code"], i["cell"], i["location"]["row"]) for i in json.loads(out)] == [("NG101", 2, 3),
                                                                                      ("NG101", 4, 2)]


def test_notebooks_and_stubs_are_discovered(project, capsys):
    (project / "nb.ipynb").write_text(_notebook([("code", BAD)]))
    (project / "types.pyi").write_text(BAD)
    _, out, _ = run(capsys, "-q", ".")
    assert {line.split(":")[0] for line in out.splitlines()} == {"bad.py", "nb.ipynb", "types.pyi"}


NB_CELLS = [
    ("markdown", ["# title\n"]),
    ("code", ["import torch\n", "%matplotlib inline\n"]),
    ("code", ["a = 1  # caf\u00e9 \"quoted\"\n", "y = torch.log(torch.softmax(x, 1))\n"]),
]
FLAGGED = "torch.log(torch.softmax(x, 1))"


def _where_in_file(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, column) of `needle`'s first character in the notebook's JSON text."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


@pytest.mark.parametrize("layout", ["jupyter", "one-line", "string-sources"])
def test_notebook_findings_land_on_the_ipynb_line_in_github_and_sarif(project, capsys, layout):
    """GitHub and code scanning annotate the .ipynb file as stored, its JSON: a finding at
    cell 3, line 2 must point at the JSON line holding that code, not at line 2 of the file.
    The message keeps the cell-qualified place the text format prints."""
    cells = NB_CELLS if layout != "string-sources" else [(t, "".join(src)) for t, src in NB_CELLS]
    nb = {"cells": [{"cell_type": t, "source": src, "metadata": {}} for t, src in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(nb, indent=1) if layout == "jupyter" else json.dumps(nb)   # escapes: \u00e9, \"
    (project / "nb.ipynb").write_text(text)
    line, col = _where_in_file(text, FLAGGED.replace('"', '\\"'))
    end_col = col + len(FLAGGED)
    if layout == "jupyter":
        assert line > 2        # the cell's own line 2 would be the wrong line of the file
    status, out, _ = run(capsys, "-q", "nb.ipynb")
    assert status == 1 and out.startswith("nb.ipynb:cell 3:2:5: NG101")           # text: unchanged

    status, out, _ = run(capsys, "--output-format", "github", "nb.ipynb")
    [annotation] = out.splitlines()
    assert annotation.startswith(f"::error title=nanguard (NG101),file=nb.ipynb,line={line},col={col},"
                                 f"endLine={line},endColumn={end_col}::nb.ipynb:cell 3:2:5: NG101 ")

    status, out, _ = run(capsys, "--output-format", "sarif", "nb.ipynb")
    [result] = json.loads(out)["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": line, "startColumn": col, "endLine": line, "endColumn": end_col}
    assert (result["properties"]["cell"], result["properties"]["cellLine"]) == (3, 2)


def test_notebook_from_stdin_is_read_as_a_notebook(project, capsys, monkeypatch):
    """`nanguard lint - < nb.ipynb`: JSON is valid Python (a dict display), so read as Python
    the notebook passed silently; its content says it is a notebook."""
    text = _notebook(NB_CELLS)

    class Stdin:
        buffer = __import__("io").BytesIO(text.encode())

    monkeypatch.setattr(sys, "stdin", Stdin)
    status, out, _ = run(capsys, "-q", "-")
    assert status == 1 and out.startswith("-:cell 3:2:5: NG101"), out
    Stdin.buffer = __import__("io").BytesIO(text.encode())
    status, out, _ = run(capsys, "-q", "--stdin-filename", "nb.ipynb", "-")
    assert status == 1 and out.startswith("nb.ipynb:cell 3:2:5: NG101"), out
    Stdin.buffer = __import__("io").BytesIO(b'{"cells": 1}\n')      # a dict display, not a notebook
    assert run(capsys, "-q", "-")[0] == 0


def test_a_broken_notebook_is_an_error_not_a_crash(project, capsys):
    (project / "nb.ipynb").write_text("{not json")
    status, _, err = run(capsys, "nb.ipynb")
    assert status == 2 and "not a Jupyter notebook" in err


NEWER_SYNTAX = textwrap.dedent("""\
    import torch
    type Vector = list[float]
    type Pair[T] = tuple[T, T]
    def first[T: dict[str, int]](x: T) -> T:
        return torch.log(torch.softmax(x, 1))
    class Box[T]:
        def get(self, x):
            return torch.log(torch.sigmoid(x))
    print(f"{d["key"]}")
    y = torch.log1p(torch.exp(x))
""")


def test_newer_syntax_is_linted_on_an_older_python():
    codes = [(f.code, f.line, f.col) for f in lint_source(NEWER_SYNTAX)]
    assert codes == [("NG101", 5, 12), ("NG102", 8, 16), ("NG104", 10, 5)]


def test_a_real_syntax_error_is_still_one():
    assert [f.code for f in lint_source("import torch\ndef f(:\n    pass\n")] == ["NG001"]
    assert [f.code for f in lint_source('import torch\nx = f"{a"\n')] == ["NG001"]


def test_latin1_file_without_a_cookie_is_read(project, capsys):
    (project / "old.py").write_bytes(b"import torch\n# caf\xe9 cr\xe8me\ny = torch.log(torch.softmax(x, 1))\n")
    status, out, err = run(capsys, "-q", "old.py")
    assert status == 1 and "internal error" not in err
    assert out.startswith("old.py:3:5: NG101")


def test_latin1_file_is_fixed_in_latin1(project, capsys):
    data = b"import torch\n# caf\xe9\ny = torch.log(torch.softmax(x, 1))\n"
    (project / "old.py").write_bytes(data)
    assert run(capsys, "--fix", "old.py")[0] == 0
    assert (project / "old.py").read_bytes() == data.replace(b"torch.log(torch.softmax(x, 1))",
                                                            b"torch.log_softmax(x, 1)")


def test_pre_commit_hooks_need_no_framework():
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "additional_dependencies" not in hooks and "--force-exclude" in hooks
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as fh:
        dependencies = tomllib.load(fh)["project"]["dependencies"]
    # torch, tensorflow and jax are extras; tomli only reads pyproject.toml on Python 3.10
    assert dependencies == ['tomli>=1.1; python_version < "3.11"']


@pytest.mark.slow
def test_linter_imports_no_framework(tmp_path):
    """Linting TF, JAX, NumPy and torch code imports none of them (nor does the CLI)."""
    (tmp_path / "m.py").write_text("import numpy as np\nimport jax.numpy as jnp\nimport tensorflow as tf\n" + BAD)
    code = textwrap.dedent(f"""
        import sys, types
        pkg = types.ModuleType("nanguard")
        pkg.__path__ = [{str(REPO / "nanguard")!r}]
        sys.modules["nanguard"] = pkg
        from nanguard.lint.cli import main
        status = main(["-q", "-j", "1", "--isolated", {str(tmp_path / "m.py")!r}])
        loaded = [m for m in ("torch", "tensorflow", "jax", "numpy", "keras") if m in sys.modules]
        assert not loaded, loaded
        sys.exit(status)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
