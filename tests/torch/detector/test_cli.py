"""`nanguard run`: programs run as with python (argv, __main__, -m from the current folder, an
absolute __file__, exit status); findings exit 1 with the report on stderr and in --json, usage
errors exit 2 with one line, a program's own uncaught exception exits 3 with its traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from nanguard.cli import main as cli_main
from nanguard.core.report import Report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BAD = textwrap.dedent("""\
    import sys
    import torch

    print("argv", sys.argv[1:], __name__)
    x = torch.zeros(3, requires_grad=True)
    y = torch.sqrt(x)              # the line the report must name
    y.sum().backward()
    print("not reached")
""")


def _write(path, text):
    path.write_text(text)
    return str(path)


def _nanguard(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "nanguard", "run", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=240)


@pytest.mark.slow
def test_script_with_nan_exits_1_with_report_and_json(tmp_path):
    script = _write(tmp_path / "train.py", BAD)
    done = _nanguard("--json", "out.json", "train.py", "--lr", "3", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "argv ['--lr', '3'] __main__" in done.stdout and "not reached" not in done.stdout
    assert "backward of sqrt" in done.stderr and "train.py:6" in done.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["found"] is True and data["phase"] == "backward"
    assert (data["status"], data["exit_code"]) == ("found", None)
    assert data["op"] == "aten.div.Tensor" and data["node"] == "SqrtBackward0"
    assert data["file"] == script and data["line"] == 6 and data["code"] == "y = torch.sqrt(x)              # the line the report must name"
    assert (data["forward_file"], data["forward_line"]) == (script, 6)
    assert data["call_line"] == 7
    assert data["inputs"] and data["explanation"] and data["suggestion"] and data["message"]
    report = Report.from_dict(data)                     # the report, read back from the file
    assert (report.api, report.forward.line, report.call.line) == ("torch.sqrt", 6, 7)
    assert report.to_dict() == {k: v for k, v in data.items() if k not in ("status", "exit_code")}


@pytest.mark.slow
def test_module_form_relative_imports_argv_and_clean_status(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    _write(pkg / "__init__.py", "")
    _write(pkg / "helper.py", "import torch\n\ndef risky(v):\n    return torch.log(v)\n")
    _write(pkg / "main.py", textwrap.dedent("""\
        import sys
        import torch
        from .helper import risky

        if __name__ == "__main__":
            print("args", sys.argv[1:])
            v = torch.tensor([float(sys.argv[1])])
            risky(v)
            sys.exit(int(sys.argv[2]))
    """))
    done = _nanguard("--json", "r.json", "-m", "pkg.main", "2.0", "3", cwd=tmp_path)
    assert done.returncode == 3, done.stderr             # clean run: the program's own status
    assert "args ['2.0', '3']" in done.stdout
    assert json.loads((tmp_path / "r.json").read_text())["found"] is False
    done = _nanguard("--json", "r.json", "-m", "pkg.main", "0.0", "3", cwd=tmp_path)
    assert done.returncode == 1
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["phase"], data["op"], data["line"]) == ("forward", "aten.log.default", 4)
    assert data["file"].endswith(os.path.join("pkg", "helper.py"))


def _run_inprocess(capsys, *args):
    try:
        status = cli_main(["run", *args])
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("args, words", [
    ((), "missing the script to run"),
    (("no_such_script.py",), "can't open file 'no_such_script.py'"),
    (("--bogus", "x.py"), "unrecognized arguments: --bogus"),
    (("--check", "nans", "x.py"), "argument --check: invalid choice"),
    (("-m",), "-m needs a module name"),
    (("-m", "no_such_pkg_xyz.mod"), "no module named 'no_such_pkg_xyz.mod'"),
])
def test_usage_errors_exit_2_with_one_line(capsys, args, words):
    status, out, err = _run_inprocess(capsys, *args)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("nanguard run: error: ") and words in err


def test_directory_is_a_usage_error(capsys, tmp_path):
    status, _, err = _run_inprocess(capsys, str(tmp_path))
    assert status == 2 and "is a directory" in err


def test_program_exception_prints_traceback_and_exits_3(capsys, tmp_path):
    """A crash is not a finding: status 3 (1 is a NaN found), the traceback as python prints
    it, and a JSON that says the program failed instead of "no NaN or Inf was detected"."""
    script = _write(tmp_path / "boom.py", "def f():\n    raise ValueError('boom')\n\nf()\n")
    out_json = tmp_path / "boom.json"
    status, _, err = _run_inprocess(capsys, "--json", str(out_json), script)
    assert status == 3
    assert err.startswith("Traceback (most recent call last):\n")
    assert f'File "{script}", line 4, in <module>' in err and err.rstrip().endswith("ValueError: boom")
    assert "runpy" not in err and "nanguard" not in err
    data = json.loads(out_json.read_text())
    assert (data["found"], data["status"], data["exit_code"]) == (False, "script_error", None)
    assert data["error"] == "ValueError: boom"
    assert data["message"] != "no NaN or Inf was detected" and "failed (ValueError: boom)" in data["message"]


@pytest.mark.parametrize("code, status, outcome", [
    ("", 0, "clean"), ("sys.exit(0)", 0, "clean"), ("sys.exit()", 0, "clean"), ("sys.exit(5)", 5, "exited"),
    ("sys.exit(1)", 1, "exited"), ("sys.exit('bye')", 1, "exited"),
])
def test_json_status_and_exit_code_of_a_program_that_ends_without_a_finding(capsys, tmp_path, code, status,
                                                                              outcome):
    script = _write(tmp_path / "ends.py", f"import sys\nprint('ran')\n{code}\n")
    out_json = tmp_path / "ends.json"
    got, out, _ = _run_inprocess(capsys, "--json", str(out_json), script)
    assert got == status and "ran" in out
    data = json.loads(out_json.read_text())
    assert (data["found"], data["status"], data["exit_code"]) == (False, outcome, status)
    assert (data["message"] == "no NaN or Inf was detected") == (outcome == "clean")


def test_file_of_the_script_is_absolute_as_under_python(capsys, tmp_path, monkeypatch):
    """python 3.11 gives a script an absolute __file__: one that changes folder and then reads
    a file beside itself must work under nanguard run too."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "data.txt").write_text("beside")
    _write(tmp_path / "proj" / "read.py", textwrap.dedent("""\
        import os, sys
        os.chdir(os.path.dirname(os.path.dirname(__file__)) or "/")
        print("file", __file__, sys.argv[0])
        with open(os.path.join(os.path.dirname(__file__), "data.txt")) as fh:
            print("read", fh.read())
    """))
    monkeypatch.chdir(tmp_path)
    status, out, err = _run_inprocess(capsys, os.path.join("proj", "read.py"))
    assert status == 0, err
    assert f"file {tmp_path / 'proj' / 'read.py'} proj/read.py" in out and "read beside" in out


def test_module_form_finds_the_package_in_the_current_folder_as_python_does(tmp_path):
    """`nanguard run -m mypkg.train` from the project folder, launched as the installed console
    script is (its own folder, not the current one, is sys.path[0]): python -m puts the current
    folder first before it looks the module up, and so must nanguard run."""
    project, bin_dir = tmp_path / "project", tmp_path / "bin"
    (project / "mypkg").mkdir(parents=True)
    bin_dir.mkdir()
    _write(project / "mypkg" / "__init__.py", "")
    _write(project / "mypkg" / "data.py", "VALUE = 42\n")
    _write(project / "mypkg" / "train.py", textwrap.dedent("""\
        import sys
        from .data import VALUE
        print("train", __name__, VALUE, sys.argv, __file__)
    """))
    launcher = _write(bin_dir / "nanguard", "import sys\nfrom nanguard.cli import main\nsys.exit(main())\n")
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    done = subprocess.run([sys.executable, launcher, "run", "--json", "r.json", "-m", "mypkg.train", "--epochs", "2"],
                          capture_output=True, text=True, cwd=project, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    module_file = str(project / "mypkg" / "train.py")
    assert f"train __main__ 42 ['{module_file}', '--epochs', '2'] {module_file}" in done.stdout
    assert json.loads((project / "r.json").read_text())["status"] == "clean"


def test_program_that_swallows_the_error_still_exits_1(capsys, tmp_path):
    script = _write(tmp_path / "swallow.py", textwrap.dedent("""\
        import torch
        try:
            torch.log(torch.zeros(1))
        except FloatingPointError:
            print("handled")
    """))
    out_json = tmp_path / "swallow.json"
    status, out, err = _run_inprocess(capsys, "--color", "never", "--json", str(out_json), script)
    assert status == 1 and "handled" in out
    assert "forward of log" in err and "\\033[" not in err
    data = json.loads(out_json.read_text())
    assert (data["found"], data["status"], data["exit_code"]) == (True, "found", 0)


def test_exit_codes_of_sys_exit(capsys, tmp_path):
    for code, want in (("0", 0), ("5", 5), ("None", 0), ("'message'", 1)):
        script = _write(tmp_path / "ex.py", f"import sys\nsys.exit({code})\n")
        status, _, err = _run_inprocess(capsys, script)
        assert status == want
        if want == 1:
            assert "message" in err


def test_check_option_and_argv_restored(capsys, tmp_path):
    argv, path0 = sys.argv[:], sys.path[0]
    script = _write(tmp_path / "inf.py", "import torch\ntorch.log(torch.zeros(1))\n")
    status, _, _ = _run_inprocess(capsys, "--check", "nan", script)
    assert status == 0                           # -inf only, and only NaN was asked for
    status, _, err = _run_inprocess(capsys, "--check", "inf", "--exhaustive", script)
    assert status == 1 and "inf.py:2" in err
    assert sys.argv == argv and sys.path[0] == path0


@pytest.mark.slow
def test_shipped_story_runs_as_documented_from_any_directory(tmp_path):
    """The README's command, `nanguard run --json report.json -m nanguard.stories...`, from a
    directory that holds nothing: the story is found as an installed module, reported at its
    sqrt, and its fix exits 0."""
    import nanguard.stories

    story = nanguard.stories.get("distance_matrix")
    done = _nanguard("--json", "report.json", "-m", story.module("nan"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "step 1: loss" not in done.stdout          # stopped at the first backward
    data = json.loads((tmp_path / "report.json").read_text())
    assert (data["file"], data["line"]) == (str(story.path("nan")), story.line("torch.sqrt("))
    assert data["call_line"] == story.line("loss.backward()")
    assert data["node"] == "SqrtBackward0" and story.fix in data["suggestion"]
    done = _nanguard("-m", story.module("fixed"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "step 5: loss" in done.stdout and "nan" not in done.stdout
