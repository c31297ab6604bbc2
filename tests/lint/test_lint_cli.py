"""The command line: output formats, exit status, noqa, selection, configuration, discovery, --fix/--diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nanguard.lint.cli import main

REPO = Path(__file__).resolve().parents[2]

BAD = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F


    def loss(logits, x):
        p = torch.log(torch.softmax(logits, dim=1))
        q = torch.log1p(torch.exp(x))
        return p, q
""")
CLEAN = "import torch\n\n\ndef f(x):\n    return torch.log_softmax(x, 1)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fresh directory (a git work tree) as the current directory."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_text_output_is_flake8_style_and_exit_1(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, _ = run(capsys, "bad.py")
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith("bad.py:6:9: NG101 ")
    assert lines[0].endswith("[*]")
    assert lines[1].startswith("bad.py:7:9: NG104 ")
    assert lines[2] == "Found 2 findings."
    assert lines[3] == "[*] 1 fixable with the `--fix` option."


def test_clean_exit_0(project, capsys):
    (project / "ok.py").write_text(CLEAN)
    status, out, _ = run(capsys, "ok.py")
    assert status == 0 and out == "All checks passed!\n"
    status, out, _ = run(capsys, "-q", "ok.py")
    assert status == 0 and out == ""


def test_json_output(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, _ = run(capsys, "--format", "json", "bad.py")
    assert status == 1
    items = json.loads(out)
    assert [(i["code"], i["location"]["row"], i["location"]["column"]) for i in items] == [
        ("NG101", 6, 9), ("NG104", 7, 9)]
    assert items[0]["name"] == "log-of-softmax" and items[0]["filename"] == "bad.py"
    edit = items[0]["fix"]["edits"][0]
    assert edit["content"] == "torch.log_softmax(logits, dim=1)"
    assert (edit["location"], edit["end_location"]) == ({"row": 6, "column": 9}, {"row": 6, "column": 48})
    assert BAD[edit["start_offset"]:edit["end_offset"]] == "torch.log(torch.softmax(logits, dim=1))"
    assert items[1]["fix"] is None


def test_select_and_ignore(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, _ = run(capsys, "-q", "--select", "NG104", "bad.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG104"]
    status, out, _ = run(capsys, "-q", "--select", "NG1", "--ignore", "NG101", "bad.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG104"]
    status, out, _ = run(capsys, "-q", "--ignore", "NG1", "bad.py")
    assert status == 0 and out == ""
    status, out, _ = run(capsys, "-q", "--select", "hand-written-softplus", "bad.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG104"]


def test_unknown_selector_is_a_usage_error(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, _, err = run(capsys, "--select", "XYZ9", "bad.py")
    assert status == 2 and "unknown rule selector" in err


def test_noqa_comments(project, capsys):
    source = BAD.replace("dim=1))", "dim=1))  # noqa: NG101").replace("torch.exp(x))", "torch.exp(x))  # noqa")
    (project / "bad.py").write_text(source)
    status, out, _ = run(capsys, "-q", "bad.py")
    assert status == 0 and out == ""
    other = BAD.replace("dim=1))", "dim=1))  # noqa: E501")
    (project / "other.py").write_text(other)
    status, out, _ = run(capsys, "-q", "other.py")
    assert "NG101" in out  # a noqa for another code does not hide this one


def test_noqa_inside_a_string_is_not_a_comment(project, capsys):
    (project / "s.py").write_text("import torch\ny = (torch.log(torch.softmax(x, 1)), '# noqa')\n")
    status, out, _ = run(capsys, "-q", "s.py")
    assert status == 1 and "NG101" in out


def test_file_level_noqa(project, capsys):
    (project / "bad.py").write_text("# nanguard: noqa: NG104\n" + BAD)
    _, out, _ = run(capsys, "-q", "bad.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG101"]
    (project / "bad.py").write_text("# nanguard: noqa\n" + BAD)
    assert run(capsys, "-q", "bad.py")[0] == 0


def test_pyproject_configuration(project, capsys):
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.nanguard.lint]
        ignore = ["NG104"]
        extend-exclude = ["generated/"]
        per-file-ignores = { "legacy_*.py" = ["NG101"] }
    """))
    (project / "bad.py").write_text(BAD)
    (project / "legacy_model.py").write_text(BAD)
    (project / "generated").mkdir()
    (project / "generated" / "g.py").write_text(BAD)
    status, out, _ = run(capsys, "-q", ".")
    assert status == 1
    assert [line.split(":")[0] + " " + line.split()[1] for line in out.splitlines()] == ["bad.py NG101"]
    # A subdirectory finds the configuration above it.
    sub = project / "pkg"
    sub.mkdir()
    (sub / "m.py").write_text(BAD)
    os.chdir(sub)
    status, out, _ = run(capsys, "-q", "m.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG101"]
    # --isolated ignores it.
    status, out, _ = run(capsys, "-q", "--isolated", "m.py")
    assert [line.split()[1] for line in out.splitlines()] == ["NG101", "NG104"]


def test_bad_configuration_is_exit_2(project, capsys):
    (project / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text("[tool.nanguard.lint]\nselct = ['NG1']\n")
    status, _, err = run(capsys, "bad.py")
    assert status == 2 and "unknown option" in err
    (project / "pyproject.toml").write_text("[tool.nanguard.lint]\nignore = ['NOPE']\n")
    assert run(capsys, "bad.py")[0] == 2
    (project / "pyproject.toml").write_text("[tool.nanguard.lint\n")
    status, _, err = run(capsys, "bad.py")
    assert status == 2 and "invalid TOML" in err


def test_missing_path_is_exit_2_but_other_files_are_still_linted(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, err = run(capsys, "-q", "nope.py", "bad.py")
    assert status == 2 and "nope.py: no such file" in err
    assert "NG101" in out


def test_unreadable_file_is_exit_2(project, capsys):
    (project / "bad.py").write_text(BAD)
    if os.geteuid() != 0:
        unreadable = project / "secret.py"
        unreadable.write_text(BAD)
        unreadable.chmod(0)
    elif os.path.exists("/proc/self/mem"):
        unreadable = Path("/proc/self/mem")  # a regular file whose read() fails (EIO), even for root
    else:  # pragma: no cover
        pytest.skip("no unreadable file available")
    status, out, err = run(capsys, "-q", str(unreadable), "bad.py")
    assert status == 2 and "cannot read" in err
    assert "NG101" in out  # the readable file is still reported


def test_syntax_error_is_a_finding_not_a_crash(project, capsys):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    (project / "bad.py").write_text(BAD)
    status, out, err = run(capsys, "-q", ".")
    assert status == 1 and err == ""
    assert [line for line in out.splitlines() if line.startswith("broken.py")] == [
        "broken.py:1:7: NG001 SyntaxError: invalid syntax"]


def test_discovery_respects_gitignore_and_default_excludes(project, capsys):
    (project / ".gitignore").write_text("ignored/\n*_gen.py\n!keep_gen.py\n")
    for rel in ("a.py", "ignored/b.py", "x_gen.py", "keep_gen.py", ".venv/lib/c.py", "build/d.py",
                "sub/e.py", "notes.txt"):
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BAD)
    (project / "sub" / ".gitignore").write_text("e.py\n")
    _, out, _ = run(capsys, "-q", "--select", "NG101", ".")
    files = sorted({line.split(":")[0] for line in out.splitlines()})
    assert files == ["a.py", "keep_gen.py"]
    _, out, _ = run(capsys, "-q", "--select", "NG101", "--no-respect-gitignore", ".")
    files = sorted({line.split(":")[0] for line in out.splitlines()})
    assert files == ["a.py", "ignored/b.py", "keep_gen.py", "sub/e.py", "x_gen.py"]
    # Explicitly named paths are linted even when excluded.
    _, out, _ = run(capsys, "-q", "--select", "NG101", "ignored/b.py", "build")
    assert sorted({line.split(":")[0] for line in out.splitlines()}) == ["build/d.py", "ignored/b.py"]


def test_exclude_option(project, capsys):
    for rel in ("a.py", "vendor/v.py", "deep/x/vendor/w.py", "docs/conf.py"):
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BAD)
    _, out, _ = run(capsys, "-q", "--select", "NG101", "--extend-exclude", "vendor,/docs", ".")
    assert sorted({line.split(":")[0] for line in out.splitlines()}) == ["a.py"]
    _, out, _ = run(capsys, "-q", "--select", "NG101", "--extend-exclude", "**/x/**", ".")
    assert "deep/x/vendor/w.py" not in out and "vendor/v.py" in out


def test_diff_writes_nothing_and_fix_writes(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, err = run(capsys, "--diff", "bad.py")
    assert status == 1
    assert out.startswith("--- a/bad.py\n+++ b/bad.py\n")
    assert "-    p = torch.log(torch.softmax(logits, dim=1))\n+    p = torch.log_softmax(logits, dim=1)\n" in out
    assert "Would fix 1 finding in 1 file." in err
    assert (project / "bad.py").read_text() == BAD
    status, out, _ = run(capsys, "--fix", "bad.py")
    assert status == 1  # NG104 has no automatic fix and remains
    assert (project / "bad.py").read_text() == BAD.replace(
        "torch.log(torch.softmax(logits, dim=1))", "torch.log_softmax(logits, dim=1)")
    assert out.splitlines()[0] == "fixed bad.py:6:9: NG101 Replace with `torch.log_softmax(logits, dim=1)`"
    assert out.splitlines()[-1] == "Found 2 findings (1 fixed, 1 remaining)."
    status, out, _ = run(capsys, "--diff", "bad.py")
    assert status == 0 and out == ""


def test_fix_and_diff_together_is_a_usage_error(project, capsys):
    (project / "bad.py").write_text(BAD)
    assert run(capsys, "--fix", "--diff", "bad.py")[0] == 2


def test_fix_keeps_encoding_and_bom(project, capsys):
    text = "# -*- coding: latin-1 -*-\nimport torch\nname = 'café'\ny = torch.log(torch.softmax(x, 1))\n"
    (project / "l.py").write_bytes(text.encode("latin-1"))
    (project / "b.py").write_bytes(b"\xef\xbb\xbf" + CLEAN.replace("torch.log_softmax(x, 1)",
                                                                   "torch.log(torch.softmax(x, 1))").encode())
    assert run(capsys, "-q", "--fix", "l.py", "b.py")[0] == 0
    assert (project / "l.py").read_bytes() == text.replace(
        "torch.log(torch.softmax(x, 1))", "torch.log_softmax(x, 1)").encode("latin-1")
    assert (project / "b.py").read_bytes() == b"\xef\xbb\xbf" + CLEAN.encode()


def test_statistics(project, capsys):
    (project / "bad.py").write_text(BAD + BAD.replace("def loss", "def loss2"))
    status, out, _ = run(capsys, "--statistics", "bad.py")
    assert status == 1
    assert out.splitlines() == ["2\tNG101\t[*] log-of-softmax", "2\tNG104\t    hand-written-softplus"]


def test_explain_and_list_rules(capsys):
    status, out, _ = run(capsys, "--explain", "NG501")
    assert status == 0 and out.startswith("NG501 where-with-singular-branch")
    assert "nanguard.safe_where" in out
    status, out, _ = run(capsys, "--explain", "log-of-softmax")
    assert status == 0 and "autofix available" in out
    assert run(capsys, "--explain", "NG999")[0] == 2
    status, out, _ = run(capsys, "--list-rules")
    assert status == 0 and len(out.splitlines()) >= 18


def test_stdin(project, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    status, out, _ = run(capsys, "-q", "--stdin-filename", "model.py", "-")
    assert status == 1 and out.splitlines()[0].startswith("model.py:6:9: NG101")


def test_parallel_run_matches_serial(project, capsys):
    # 40 files of different sizes: the 16 largest go to the pool one at a time, the rest in chunks.
    for i in range(40):
        (project / f"m{i:02d}.py").write_text(("# pad\n" * (i * 7 % 40)) + (BAD if i % 3 else CLEAN))
    serial = run(capsys, "-q", "-j", "1", ".")
    parallel = run(capsys, "-q", "-j", "2", ".")
    assert serial == parallel and serial[0] == 1 and serial[1].count("NG101") == 26


@pytest.mark.slow
def test_console_entry_point_subprocess(project):
    """`python -m nanguard lint` end to end (one process: it pays for the package's torch import)."""
    (project / "bad.py").write_text(BAD)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "nanguard", "lint", "--format", "json", "bad.py"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 1, proc.stderr
    assert [i["code"] for i in json.loads(proc.stdout)] == ["NG101", "NG104"]


def test_argparse_usage_error_is_exit_2(project, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--format", "xml", "x.py"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_nanguard_cli_registers_lint(project, capsys):
    from nanguard.cli import main as nanguard_main

    (project / "ok.py").write_text(CLEAN)
    assert nanguard_main(["lint", "-q", "ok.py"]) == 0
    (project / "bad.py").write_text(BAD)
    assert nanguard_main(["lint", "-q", "bad.py"]) == 1


@pytest.mark.slow
def test_linter_does_not_import_torch(tmp_path):
    """The linter reads source only: loading and running it never imports torch.

    The parent `nanguard` package is replaced by a bare namespace so that what it imports
    (the safe ops, which do need torch) does not count against the linter.
    """
    (tmp_path / "bad.py").write_text(BAD)
    code = textwrap.dedent(f"""
        import sys, types
        pkg = types.ModuleType("nanguard")
        pkg.__path__ = [{str(REPO / "nanguard")!r}]
        sys.modules["nanguard"] = pkg
        from nanguard.lint.cli import main
        status = main(["-q", "-j", "1", {str(tmp_path / "bad.py")!r}])
        assert "torch" not in sys.modules, "torch was imported"
        sys.exit(status)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "NG101" in proc.stdout


def test_a_file_named_twice_is_linted_once(project, capsys):
    (project / "bad.py").write_text(BAD)
    status, out, _ = run(capsys, "-q", "bad.py", ".", "./bad.py")
    assert status == 1 and len(out.splitlines()) == 2


@pytest.mark.slow
def test_output_into_a_closed_pipe_ends_quietly(project):
    """`nanguard lint ... | head -1`: the reader leaves after one line; no BrokenPipeError
    traceback, and the status is still the run's own (1: findings)."""
    (project / "many.py").write_text("import torch\n" + "".join(
        f"def f{i}(x):\n    return torch.log(torch.softmax(x, dim=-1))\n" for i in range(2000)))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for args in (["many.py"], ["--output-format", "json", "many.py"], ["--list-rules"]):
        proc = subprocess.Popen([sys.executable, "-m", "nanguard", "lint", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        first = proc.stdout.readline()
        proc.stdout.close()                      # what `head -1` does once it has its line
        err = proc.stderr.read().decode()
        proc.stderr.close()
        status = proc.wait(timeout=120)
        assert first
        assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
        assert status == (0 if args == ["--list-rules"] else 1)


def test_sarif_names_the_projects_declared_url(project, capsys):
    """The SARIF driver's informationUri is the URL the package metadata declares."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    with open(REPO / "pyproject.toml", "rb") as fh:
        urls = tomllib.load(fh)["project"]["urls"]
    (project / "bad.py").write_text(BAD)
    status, out, _ = run(capsys, "--output-format", "sarif", "bad.py")
    driver = json.loads(out)["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == urls["Homepage"] and driver["informationUri"] in urls.values()
    import nanguard
    assert driver["version"] == nanguard.__version__
    assert all(rule["helpUri"].startswith(urls["Homepage"]) for rule in driver["rules"])


def test_config_is_read_with_tomli_where_there_is_no_tomllib(project, capsys, monkeypatch):
    """Python 3.10 has no tomllib: the config is read with tomli, which the package declares
    as a dependency there (tests/core/test_packaging.py), instead of exiting 2."""
    import tomllib

    monkeypatch.setitem(sys.modules, "tomllib", None)           # `import tomllib` fails, as on 3.10
    monkeypatch.setitem(sys.modules, "tomli", tomllib)           # the same API, under tomli's name
    (project / "pyproject.toml").write_text("[tool.nanguard.lint]\nignore = ['NG104']\n")
    (project / "bad.py").write_text(BAD)
    status, out, err = run(capsys, "-q", "bad.py")
    assert status == 1 and "NG101" in out and "NG104" not in out, err
    monkeypatch.setitem(sys.modules, "tomli", None)               # neither: a clear usage error
    status, _, err = run(capsys, "-q", "bad.py")
    assert status == 2 and "needs `tomli`" in err
