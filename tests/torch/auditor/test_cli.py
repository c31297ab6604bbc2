"""`nanguard audit` on the command line: exit statuses, formats, witnesses and emitted tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BUGGY = textwrap.dedent("""\
    import torch
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4, 3))
    opt = torch.optim.SGD([w], lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        probs = torch.softmax(x @ w, dim=-1)
        loss = -torch.log(probs[:, 0]).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    print("done")
""")
LOG_LINE = 8
CLEAN = BUGGY.replace("-torch.log(probs[:, 0]).mean()", "-torch.log_softmax(x @ w, dim=-1)[:, 0].mean()")
FAILING = BUGGY.replace("x = torch.randn(8, 4)", "x = torch.randn(8, 5)")


def _run(tmp_path: Path, *args: str, source: str = BUGGY):
    script = tmp_path / "train.py"
    script.write_text(source)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "nanguard", "audit", *args, str(script)], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)


def test_findings_exit_1_with_the_line_the_fix_and_a_witness(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"train.py:{LOG_LINE}: aten.log.default" in proc.stdout
    assert "F.log_softmax" in proc.stdout and "witness  .nanguard/witnesses/" in proc.stdout
    assert "done" not in proc.stdout + proc.stderr        # stopped at the first backward


def test_clean_script_exits_0(tmp_path: Path) -> None:
    proc = _run(tmp_path, source=CLEAN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no op can produce NaN/Inf" in proc.stdout


def test_script_that_fails_before_its_backward_exits_2(tmp_path: Path) -> None:
    proc = _run(tmp_path, source=FAILING)
    assert proc.returncode == 2
    assert "RuntimeError" in proc.stderr and "failed before its first backward" in proc.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "nanguard", "audit", str(tmp_path / "missing.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = _run(tmp_path, "--range", "data=1")
    assert proc.returncode == 2 and "NAME=LO,HI" in proc.stderr


def test_json_has_the_documented_fields(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--format", "json", source="print('the script talks')\n" + BUGGY)
    assert "the script talks" in proc.stderr            # stdout holds the report alone
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"findings", "unsupported", "ops_traced", "seconds"}
    (f,) = doc["findings"]
    assert {"file", "line", "op", "kind", "range", "witness", "observed", "fix"} <= set(f)
    assert f["line"] == LOG_LINE + 1 and f["kind"] == "nonpositive" and f["observed"] is False
    assert f["range"][0] == 0.0 and os.path.exists(tmp_path / f["witness"])


def test_sarif_and_github_formats(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--format", "sarif")
    log = json.loads(proc.stdout)
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == LOG_LINE
    proc = _run(tmp_path, "--format", "github", "--no-witness")
    assert proc.stdout.startswith("::error ") and f"line={LOG_LINE}" in proc.stdout


def test_emitted_test_replays_the_witness_and_fails_on_the_nan(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--emit-tests", "nan_tests")
    assert proc.returncode == 1
    tests = sorted((tmp_path / "nan_tests").glob("test_*.py"))
    assert len(tests) == 1
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests[0])],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1, run.stdout
    assert "made" in run.stdout and "inf" in run.stdout and "log_softmax" in run.stdout


def test_readme_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Audit: find the NaN before it fires", 1)[1].split("\n## ", 1)[0]
    program = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```console\n$ nanguard audit train.py\n", 1)[1].split("```", 1)[0]
    proc = _run(tmp_path, source=program)
    assert proc.returncode == 1
    printed = proc.stdout.splitlines()
    for line in shown.splitlines()[:6]:          # the finding block, word for word
        assert line in printed, f"README line not printed: {line!r}\n{proc.stdout}"


def test_demo_section_finds_the_story_before_it_fires() -> None:
    import io

    from nanguard.demo import run_demo
    out = io.StringIO()
    assert run_demo(["nanguard.demo.audit"], stream=out) == 0
    text = out.getvalue()
    assert "aten.sqrt.default can produce" in text and "witness replayed" in text
    assert "distance_matrix_fixed.py audited: 0 findings" in text and "with log_softmax: 0 findings" in text


def test_module_form_and_script_arguments(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(BUGGY.replace("for step in range(3):", "import sys\nassert sys.argv[1:] == ['--lr', '0.1']\nfor step in range(3):"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "nanguard", "audit", "--no-witness", "-m", "mypkg.train", "--",
                           "--lr", "0.1"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "train.py:10: aten.log.default" in proc.stdout


def test_an_inference_script_without_backward_is_traced_to_its_end(tmp_path: Path) -> None:
    source = textwrap.dedent("""\
        import torch
        net = torch.nn.Linear(4, 3)
        with torch.no_grad():
            for _ in range(2):
                x = torch.randn(5, 4)
                y = torch.sqrt(net(x))
        print("done")
    """)
    proc = _run(tmp_path, "--format", "json", "--no-witness", source=source)
    doc = json.loads(proc.stdout)
    assert doc["stopped_at"] == "end" and proc.returncode == 1
    assert [(f["line"], f["kind"], f["phase"]) for f in doc["findings"]] == [(6, "negative", "value")]
