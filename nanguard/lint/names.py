"""Who is `F.softmax`? Import resolution and the table of recognised tensor operations.

Rules never match bare names: a call counts as `log` only when its function resolves,
through the file's imports, to a known PyTorch/TensorFlow/Keras function
(`import torch.nn.functional as F`, `from torch import log`, `import tensorflow.compat.v1 as tf`,
relative imports inside a package), or when it is a tensor *method* with the right arity
(`x.log()` takes no argument, so `self.log("loss", v)` is not a logarithm).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nanguard.lint.op_table import (  # noqa: F401  (re-exported: the rules import them from here)
    JAX,
    KERAS,
    METHOD,
    METHODS,
    NUMPY,
    QUALNAME_TO_OP,
    TF,
    TORCH,
    WRAPPER_METHODS,
    framework_of,
)

_FRAMEWORK_ROOTS = frozenset({"torch", "tensorflow", "keras", "tf_keras", "functorch", "jax", "numpy"})


def _normalise(qualname: str) -> str:
    for prefix in ("tensorflow.compat.v1.", "tensorflow.compat.v2.", "tensorflow._api.v2."):
        if qualname.startswith(prefix):
            return "tensorflow." + qualname[len(prefix):]
    for prefix in ("tensorflow.keras.", "tf_keras."):
        if qualname.startswith(prefix):
            return "keras." + qualname[len(prefix):]
    return qualname


@dataclass
class OpCall:
    """A call recognised as a tensor op, with uniform access to its operands.

    For the method form the receiver is operand 0: `x.pow(2)` and `torch.pow(x, 2)`
    both have ``operand(0) is x`` and ``operand(1) == 2``.
    """

    op: str
    node: ast.Call
    framework: str  # TORCH, TF, KERAS, JAX, NUMPY or METHOD
    qualname: str = ""

    @property
    def method(self) -> bool:
        return self.framework == METHOD

    @property
    def positional(self) -> list[ast.expr]:
        args = [a for a in self.node.args if not isinstance(a, ast.Starred)]
        if self.method:
            return [self.node.func.value] + args  # type: ignore[attr-defined]
        return args

    def operand(self, index: int, *keywords: str) -> ast.expr | None:
        """Positional operand `index`, or the first keyword among `keywords` that is given."""
        for kw in self.node.keywords:
            if kw.arg in keywords:
                return kw.value
        pos = self.positional
        return pos[index] if index < len(pos) else None

    @property
    def input(self) -> ast.expr | None:
        return self.operand(0, "input", "x", "input_tensor", "logits", "features", "a", "t")

    def keyword(self, name: str) -> ast.expr | None:
        for kw in self.node.keywords:
            if kw.arg == name:
                return kw.value
        return None

    def has_star_args(self) -> bool:
        return any(isinstance(a, ast.Starred) for a in self.node.args) or any(
            kw.arg is None for kw in self.node.keywords)


class ImportMap:
    """Local name -> qualified module/function name, from every import in the file.

    Imports anywhere in the file count (function-local `import torch` is common in
    library code). `module` is the file's dotted module name, when known, so that
    `from .. import functional as F` inside `torch/nn/modules/` resolves.
    """

    def __init__(self, module: str | None = None, is_package: bool = False) -> None:
        self.aliases: dict[str, str] = {}
        self.module_level: dict[str, str] = {}
        # Names bound by imports we cannot resolve (relative imports of an unknown package):
        # modules, not tensors, so `F.softmax(x, 1)` is not read as a method call on `F`.
        self.opaque: set = set()
        self._uses_tensors: bool | None = None
        self._default: str | None = None
        self.module = module
        self.is_package = is_package

    def add(self, node: ast.AST, module_level: bool) -> None:
        bound: list[tuple[str, str]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound.append((alias.asname, alias.name))
                else:
                    head = alias.name.split(".", 1)[0]
                    bound.append((head, head))
        elif isinstance(node, ast.ImportFrom):
            base = self._from_base(node)
            if base is None:
                self.opaque.update(a.asname or a.name for a in node.names)
                return
            for alias in node.names:
                if alias.name == "*":
                    continue
                bound.append((alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name))
        self._uses_tensors = None
        self._default = None
        for local, target in bound:
            # The first binding wins: a later conflicting import of the same alias is rare
            # and guessing between two modules would make resolution unpredictable.
            self.aliases.setdefault(local, target)
            if module_level:
                self.module_level.setdefault(local, target)

    def _from_base(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module or ""
        if not self.module:
            return None
        parts = self.module.split(".")
        if not self.is_package:
            parts = parts[:-1]
        if node.level - 1 > len(parts):
            return None
        parts = parts[: len(parts) - (node.level - 1)]
        if node.module:
            parts.append(node.module)
        return ".".join(parts)

    def qualname(self, expr: ast.expr) -> str | None:
        """`F.softmax` -> 'torch.nn.functional.softmax' when F is imported; None otherwise."""
        attrs: list[str] = []
        while isinstance(expr, ast.Attribute):
            attrs.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        base = self.aliases.get(expr.id)
        if base is None:
            return None
        attrs.reverse()
        return ".".join([base] + attrs)

    @property
    def uses_tensors(self) -> bool:
        """Does the file import a tensor framework? Method forms (`x.log()`) count only then:
        `Decimal(...).sqrt()` or `sympy_expr.norm()` in a file without torch/tf are not tensors."""
        if self._uses_tensors is None:
            self._uses_tensors = any(t.split(".", 1)[0] in _FRAMEWORK_ROOTS for t in self.aliases.values())
        return self._uses_tensors

    @property
    def default_framework(self) -> str:
        """The framework the file's method calls (`x.log()`) and plain arithmetic belong to: torch
        when it imports torch, else multi-backend Keras (keras without tensorflow), TensorFlow,
        JAX, NumPy; torch for a file that imports none."""
        if self._default is None:
            roots = {t.split(".", 1)[0] for t in self.aliases.values()}
            if roots & {"torch", "functorch"}:
                self._default = TORCH
            elif "keras" in roots and "tensorflow" not in roots:
                self._default = KERAS
            elif roots & {"tensorflow", "keras", "tf_keras"}:
                self._default = TF
            elif "jax" in roots:
                self._default = JAX
            elif "numpy" in roots:
                self._default = NUMPY
            else:
                self._default = TORCH
        return self._default

    def spellings(self, qualname: str) -> list[str]:
        """The ways module `qualname` can be written with the file's module-level imports, shortest
        first: ['F', 'torch.nn.functional'] after `import torch` and `import torch.nn.functional as F`.
        Whether a name still holds its import where it is used is `fix_safety.spelling`'s question."""
        candidates = set()
        for local, target in self.module_level.items():
            if target == qualname:
                candidates.add(local)
            elif qualname.startswith(target + ".") and target in ("torch", "tensorflow", "keras", "jax"):
                candidates.add(local + qualname[len(target):])
        return sorted(candidates, key=lambda c: (len(c), c))

    def spelling(self, qualname: str) -> str | None:
        """The shortest of `spellings`; None when the file cannot name the module."""
        found = self.spellings(qualname)
        return found[0] if found else None


_MODULE_CALLS = {"torch.nn.NLLLoss": "nll_loss", "torch.nn.modules.loss.NLLLoss": "nll_loss",
                 "torch.nn.KLDivLoss": "kl_div", "torch.nn.modules.loss.KLDivLoss": "kl_div",
                 "torch.nn.MSELoss": "mse_loss", "torch.nn.modules.loss.MSELoss": "mse_loss"}
# Module classes whose instances compute an op: `sm = nn.Softmax(dim=1)`, then `sm(x)`.
MODULE_INSTANCE_OPS = {**_MODULE_CALLS,
                       "torch.nn.Softmax": "softmax", "torch.nn.modules.activation.Softmax": "softmax",
                       "torch.nn.LogSoftmax": "log_softmax", "torch.nn.modules.activation.LogSoftmax": "log_softmax",
                       "torch.nn.Sigmoid": "sigmoid", "torch.nn.modules.activation.Sigmoid": "sigmoid"}


def instance_op(imports: ImportMap, constructor: ast.expr, call: ast.Call) -> OpCall | None:
    """`call` of a module instance built by `constructor` (`nn.Softmax(dim=1)`): its op, else None."""
    if not isinstance(constructor, ast.Call) or not isinstance(constructor.func, (ast.Name, ast.Attribute)):
        return None
    qual = imports.qualname(constructor.func)
    if qual is None:
        return None
    qual = _normalise(qual)
    op = MODULE_INSTANCE_OPS.get(qual)
    return OpCall(op, call, framework_of(qual), qual) if op is not None else None


def function_op(imports: ImportMap, call: ast.Call) -> OpCall | None:
    """Recognise a call to a known function (through imports) or a tensor method."""
    func = call.func
    if isinstance(func, ast.Attribute):
        qual = imports.qualname(func)
        if qual is not None:
            qual = _normalise(qual)
            op = QUALNAME_TO_OP.get(qual)
            if op is not None:
                return OpCall(op, call, framework_of(qual), qual)
            # A module function we do not know (`torch.zeros`, `np.log`) is not a method call.
            return None
        spec = METHODS.get(func.attr)
        if spec is None or not imports.uses_tensors:
            return None
        if isinstance(func.value, ast.Name) and func.value.id in imports.opaque:
            return None
        op, least, most = spec
        npos = len(call.args)
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if op in ("softmax", "log_softmax") and npos == 0 and not call.keywords:
            return None  # `x.softmax()` without dim is not torch (dim is required)
        if least <= npos <= most:
            return OpCall(op, call, METHOD, "")
        return None
    if isinstance(func, ast.Call) and isinstance(func.func, (ast.Name, ast.Attribute)):
        # `nn.NLLLoss()(log_p, y)`: calling a loss module is its functional form.
        qual = imports.qualname(func.func)
        op = _MODULE_CALLS.get(_normalise(qual)) if qual is not None else None
        return OpCall(op, call, framework_of(qual), qual) if op is not None else None  # type: ignore[arg-type]
    if isinstance(func, ast.Name):
        qual = imports.aliases.get(func.id)
        if qual is None:
            return None
        qual = _normalise(qual)
        op = QUALNAME_TO_OP.get(qual)
        if op is not None:
            return OpCall(op, call, framework_of(qual), qual)
    return None
