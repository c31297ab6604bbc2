"""When a fix may be applied: names that resolve to the module, and places a rewrite must not touch.

A fix is only as safe as the names it writes. `spelling` returns a way to write a module
that really is that module where the finding is: the head name must be bound, in the scope
chain of the finding, only by module-level imports. `B, T, F = spec.shape`, a module-level
`F = None` or a parameter named `F` all shadow `import torch.nn.functional as F`, and then
`torch.nn.functional` (via `import torch`) is used instead, or no fix is offered.

`refusal` names the contexts where a semantics-preserving rewrite is still wrong: inside the
function that implements the replacement (rewriting `logsumexp`'s own body to call
`torch.logsumexp` recurses), and in test code, where a hand-written formula is the reference
the library op is checked against.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.module_kind import path_parts
from nanguard.lint.scope import Scope

_TEST_FILE = re.compile(r"^(test_.*|.*_test|tests?|conftest)\.pyi?$")
_TEST_DIRS = frozenset({"test", "tests", "testing"})
_CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def is_test_path(path: str) -> bool:
    """`test_ops.py`, `ops_test.py`, `conftest.py`, or a file under a `tests/` directory."""
    parts = path_parts(path)
    return bool(_TEST_FILE.match(parts[-1])) or any(p in _TEST_DIRS for p in parts[:-1])


def binds_only_imports(ctx, name: str, scope: Scope) -> bool:
    """Is `name`, seen from `scope`, bound only by module-level imports (never reassigned, never a
    parameter, a loop or unpacking target, a `global` in a function)?"""
    found, values = ctx.lookup(name, scope)
    if found is not ctx.module_scope:
        return False
    return len(values) == ctx.import_bindings.get(name, 0)


def spelling(ctx, qualname: str, scope: Scope) -> str | None:
    """The shortest spelling of module `qualname` whose head name is the imported module at `scope`."""
    for text in ctx.imports.spellings(qualname):
        if binds_only_imports(ctx, text.split(".", 1)[0], scope):
            return text
    return None


def enclosing_functions(scope: Scope | None) -> list[str]:
    names = []
    while scope is not None:
        if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(scope.node.name)
        scope = scope.parent
    return names


def _test_function(name: str) -> bool:
    low = name.lower()
    return low.startswith("test") or any(w in low for w in ("reference", "oracle", "naive")) \
        or re.search(r"(^|_)ref(_|$)", low) is not None


def in_test_file(path: str) -> bool:
    """A test file (`test_*.py`, `*_test.py`, `conftest.py`, or under `test/`, `tests/`, `testing/`):
    its formulas run on the test's own inputs, so its findings are lowered to "possible". A function's
    name (`naive_attention`, `reference_loss`) lowers nothing: production code is linted as such."""
    return is_test_path(path)


def refusal(path: str, scope: Scope, replacement_text: str) -> str | None:
    """Why a fix whose new text is `replacement_text` must not be applied at `scope`, else None."""
    if is_test_path(path):
        return "test code: the hand-written formula may be the reference the op is tested against"
    called = _CALLED.search(replacement_text)
    if called is None:
        return None
    new_name = called.group(1).strip("_").lower()
    for name in enclosing_functions(scope):
        low = name.lower()
        if new_name in low.strip("_"):
            return f"inside `{name}`, which implements `{called.group(1)}`: the rewrite would call itself"
        if _test_function(name):
            return f"inside `{name}`, a test or reference implementation"
    return None
