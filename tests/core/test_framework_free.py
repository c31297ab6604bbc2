"""`nanguard`, `nanguard.core` and `nanguard.lint` import no framework; the torch pillars say
which extra to install when torch is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = "import sys\nfor name in ('torch', 'tensorflow', 'jax', 'numpy'):\n    sys.modules[name] = None\n"
HAZARD = "import torch\n\ndef loss(x):\n    return torch.log(torch.exp(x) + 1)\n"


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_core_and_lint_import_no_framework(tmp_path: Path) -> None:
    done = _python("""
        import importlib, pkgutil
        import nanguard, nanguard.core, nanguard.lint, nanguard.cli
        for package in (nanguard.core, nanguard.lint):
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                if not info.name.endswith("__main__"):
                    importlib.import_module(info.name)
        loaded = [m for m, mod in sys.modules.items() if mod is not None and m.split(".")[0] in ("torch", "tensorflow", "jax")]
        print("ok", sorted(loaded))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "[]"]


def test_lint_finds_hazards_without_a_framework(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(HAZARD)
    done = _python("""
        from nanguard.cli import main
        sys.exit(main(["lint", "model.py"]))
    """, tmp_path)
    assert done.returncode == 1, done.stderr
    assert "model.py:4" in done.stdout and "nanguard.softplus" in done.stdout


@pytest.mark.parametrize("statement", ["import nanguard.torch", "import nanguard; nanguard.softplus",
                                       "from nanguard import detect"])
def test_torch_pillars_name_the_extra_when_torch_is_missing(tmp_path: Path, statement: str) -> None:
    done = _python(statement, tmp_path)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "pip install 'nanguard[torch]'" in done.stderr, done.stderr


@pytest.mark.slow
def test_nanguard_lint_runs_in_a_venv_without_torch(tmp_path: Path) -> None:
    """A real environment holding no framework at all, not just a blocked import."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    (tmp_path / "model.py").write_text(HAZARD)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(REPO), NO_COLOR="1")
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert probe.stdout.strip() == "None", "the bare venv should not see torch"
    done = subprocess.run([str(python), "-m", "nanguard", "lint", "model.py"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "model.py:4" in done.stdout
