"""`nanguard.core` imports no backend: every module of it imports, and a report of each
backend formats, in a process where torch, tensorflow and jax cannot be imported."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nanguard.core

REPO = Path(__file__).resolve().parents[2]
CORE = Path(nanguard.core.__file__).resolve().parent
BACKENDS = ("torch", "tensorflow", "jax", "keras", "optax")

BLOCK = textwrap.dedent(f"""
    import importlib.abc, sys

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BACKENDS!r}:
                raise ImportError(f"blocked: {{name}}")
            return None

    sys.meta_path.insert(0, Blocked())
""")

PROBE = textwrap.dedent("""
    import importlib, pkgutil
    import nanguard.core
    names = [info.name for info in pkgutil.walk_packages(nanguard.core.__path__, "nanguard.core.")]
    for name in names:
        importlib.import_module(name)
    from nanguard.core.report_builder import build_report
    for framework, op, phase, forward_op, api in (
            ("torch", "aten.sqrt.default", "forward", None, "torch.sqrt"),
            ("torch", "aten.mul.Tensor", "backward", "aten._softmax.default", None),
            ("tf", "Sqrt", "forward", None, ""), ("jax", "div", "forward", None, "jnp.divide")):
        text = build_report(framework=framework, phase=phase, kind="nan", op=op, forward_op=forward_op,
                            api=api).format(color=False)
        assert text.startswith("nanguard: first non-finite value (NaN)"), text
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BACKENDS
                    or m.startswith(("nanguard.torch", "nanguard.tf", "nanguard.jax")))
    print(len(names), loaded)
""")


def test_every_core_module_imports_with_the_backends_blocked() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    code = BLOCK + f"BACKENDS = {BACKENDS!r}\n" + PROBE
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.split(" ", 1)
    # every module and subpackage (its __init__) but the package itself
    assert int(count) == len(list(CORE.rglob("*.py"))) - 1
    assert loaded.strip() == "[]"


def test_no_core_module_names_a_backend_in_an_import() -> None:
    """Also the imports inside functions, which an import of the module never runs."""
    bad = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad += [f"{path.name}:{node.lineno} {n}" for n in names
                    if n.split(".")[0] in BACKENDS or n.startswith(("nanguard.torch", "nanguard.tf", "nanguard.jax"))]
    assert bad == []
