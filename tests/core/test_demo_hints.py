"""Without TensorFlow or JAX, the demo's TF and JAX sections print one line saying how to get
the framework and the demo goes on (`make demo` installs only torch). Runs with no framework."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nanguard.demo import installed, run_demo

REPO = Path(__file__).resolve().parents[2]
TF_HINT = "TensorFlow stories (seeds 003, 004) skipped: TensorFlow is not installed; pip install 'nanguard[tf]'"
JAX_HINT = "JAX story (the double where) skipped: JAX is not installed; pip install 'nanguard[jax]'"
FRAMEWORK_SECTIONS = ["nanguard.demo.tf_stories", "nanguard.demo.jax_stories"]


def _python(code: str, blocked: tuple) -> subprocess.CompletedProcess:
    block = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    return subprocess.run([sys.executable, "-c", block + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name, package=None):
        return None if name.split(".")[0] in names else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_frameworks_print_one_hint_each_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "tensorflow", "jax")
    assert not installed("tensorflow") and not installed("jax")
    out = io.StringIO()
    assert run_demo(FRAMEWORK_SECTIONS, stream=out) == 0
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert lines == [f"○ {TF_HINT}", f"○ {JAX_HINT}", "All demo sections finished."]


def test_installed_is_false_for_a_blocked_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanguard_no_such_framework", None)
    assert installed("nanguard_no_such_framework") is False
    assert installed("nanguard_really_not_there") is False
    assert installed("json") is True


def test_demo_command_without_tf_and_jax_prints_the_hints_and_finishes() -> None:
    done = _python("""
        from nanguard.cli import main
        sys.exit(main(["demo", "--section", "tf_stories", "--section", "jax_stories"]))
    """, ("tensorflow", "jax"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("pip install 'nanguard[tf]'") == 1 and TF_HINT in done.stdout
    assert done.stdout.count("pip install 'nanguard[jax]'") == 1 and JAX_HINT in done.stdout
    assert "All demo sections finished." in done.stdout and "Traceback" not in done.stderr
    assert "TensorFlow: seeds" not in done.stdout and "JAX: the double where" not in done.stdout


def test_a_framework_that_is_found_but_does_not_import_is_one_line_too() -> None:
    """find_spec says yes, the import fails (a broken install): still one line, no crash."""
    done = _python("""
        import importlib.util, io
        importlib.util.find_spec = lambda name, package=None: object()
        from nanguard.demo import run_demo
        out = io.StringIO()
        run_demo(["nanguard.demo.tf_stories", "nanguard.demo.jax_stories"], stream=out)
        print(out.getvalue())
    """, ("tensorflow", "jax"))
    assert done.returncode == 0, done.stderr
    assert "TensorFlow stories (seeds 003, 004) skipped: TensorFlow does not import" in done.stdout
    assert "JAX story (the double where) skipped: JAX does not import" in done.stdout
    assert "All demo sections finished." in done.stdout


TORCH_HINT = ("PyTorch sections (prevent, detect, recover, audit) skipped: PyTorch is not installed; "
              "pip install 'nanguard[torch]'")


@pytest.mark.parametrize("blocked", [("torch", "tensorflow", "jax"), ("torch",)],
                         ids=["bare-install", "tf-and-jax-only"])
def test_demo_without_torch_runs_what_it_can_and_exits_0(blocked) -> None:
    """`nanguard demo` on a bare install (or a TF-only / JAX-only one): the PyTorch sections are
    one line saying how to get them, the sections whose framework is here run, exit 0."""
    done = _python("""
        from nanguard.cli import main
        sys.exit(main(["demo"]))
    """, blocked)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "No module named 'torch'" not in done.stderr
    assert done.stdout.count("pip install 'nanguard[torch]'") == 1 and TORCH_HINT in done.stdout
    assert "Lint: find the anti-patterns before anything runs" in done.stdout    # needs no framework
    assert "All demo sections finished." in done.stdout
    assert "Prevent: safe ops" not in done.stdout and "Detect & locate" not in done.stdout
    if "tensorflow" in blocked:
        assert TF_HINT in done.stdout and JAX_HINT in done.stdout
    else:                                    # their stories ran (where installed), without torch
        assert (TF_HINT in done.stdout) == (not installed("tensorflow"))
        if installed("tensorflow"):
            assert "TensorFlow: seed stories 003 and 004" in done.stdout
        if installed("jax"):
            assert "JAX: the double where" in done.stdout and JAX_HINT not in done.stdout
