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

TORCH = "torch"
TF = "tf"
METHOD = "method"

# Canonical op -> qualified function names, after `_normalise` (tf.compat.v1.x -> tensorflow.x,
# tensorflow.keras.backend -> keras.backend).
_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "log": ("torch.log", "tensorflow.log", "tensorflow.math.log", "keras.backend.log", "keras.ops.log"),
    "log2": ("torch.log2", "keras.ops.log2"),
    "log10": ("torch.log10", "keras.ops.log10"),
    "log1p": ("torch.log1p", "torch.special.log1p", "tensorflow.log1p", "tensorflow.math.log1p",
              "keras.ops.log1p"),
    "exp": ("torch.exp", "tensorflow.exp", "tensorflow.math.exp",
            "keras.backend.exp", "keras.ops.exp"),
    "expm1": ("torch.expm1", "torch.special.expm1", "tensorflow.math.expm1", "tensorflow.expm1", "keras.ops.expm1"),
    "softmax": ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
                "tensorflow.nn.softmax", "tensorflow.math.softmax", "keras.backend.softmax",
                "keras.activations.softmax", "keras.ops.softmax"),
    "log_softmax": ("torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                    "tensorflow.nn.log_softmax", "tensorflow.math.log_softmax", "keras.ops.log_softmax"),
    "sigmoid": ("torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit",
                "tensorflow.sigmoid", "tensorflow.math.sigmoid", "tensorflow.nn.sigmoid",
                "keras.backend.sigmoid", "keras.activations.sigmoid", "keras.ops.sigmoid"),
    "sum": ("torch.sum", "torch.nansum", "tensorflow.reduce_sum", "tensorflow.math.reduce_sum",
            "keras.backend.sum", "keras.ops.sum"),
    "mean": ("torch.mean", "torch.nanmean", "tensorflow.reduce_mean", "tensorflow.math.reduce_mean",
             "keras.backend.mean", "keras.ops.mean"),
    "count_nonzero": ("torch.count_nonzero", "tensorflow.math.count_nonzero", "tensorflow.count_nonzero"),
    "sqrt": ("torch.sqrt", "tensorflow.sqrt", "tensorflow.math.sqrt", "keras.backend.sqrt", "keras.ops.sqrt"),
    "rsqrt": ("torch.rsqrt", "tensorflow.rsqrt", "tensorflow.math.rsqrt", "keras.ops.rsqrt"),
    "reciprocal": ("torch.reciprocal", "tensorflow.reciprocal", "tensorflow.math.reciprocal",
                   "keras.ops.reciprocal"),
    "pow": ("torch.pow", "torch.float_power", "tensorflow.pow", "tensorflow.math.pow",
            "keras.backend.pow", "keras.ops.power"),
    "square": ("torch.square", "tensorflow.square", "tensorflow.math.square", "keras.backend.square",
               "keras.ops.square"),
    "abs": ("torch.abs", "torch.absolute", "tensorflow.abs", "tensorflow.math.abs", "keras.backend.abs",
            "keras.ops.abs"),
    "relu": ("torch.relu", "torch.nn.functional.relu", "tensorflow.nn.relu", "keras.backend.relu",
             "keras.activations.relu", "keras.ops.relu"),
    "acos": ("torch.acos", "torch.arccos", "tensorflow.acos", "tensorflow.math.acos", "keras.ops.arccos"),
    "asin": ("torch.asin", "torch.arcsin", "tensorflow.asin", "tensorflow.math.asin", "keras.ops.arcsin"),
    "atanh": ("torch.atanh", "torch.arctanh", "tensorflow.atanh", "tensorflow.math.atanh"),
    "where": ("torch.where", "tensorflow.where", "tensorflow.where_v2", "keras.ops.where"),
    "masked_fill": ("torch.masked_fill",),
    "clamp": ("torch.clamp", "torch.clip", "tensorflow.clip_by_value", "keras.backend.clip", "keras.ops.clip"),
    "clamp_min": ("torch.clamp_min",),
    "maximum": ("torch.maximum", "torch.max", "torch.fmax", "tensorflow.maximum", "tensorflow.math.maximum",
                "keras.backend.maximum", "keras.ops.maximum"),
    "div": ("torch.div", "torch.divide", "torch.true_divide", "tensorflow.divide", "tensorflow.math.divide",
            "tensorflow.truediv", "tensorflow.math.truediv", "tensorflow.realdiv", "keras.ops.divide",
            "keras.ops.true_divide"),
    "std": ("torch.std",),
    "var": ("torch.var",),
    "std_mean": ("torch.std_mean",),
    "var_mean": ("torch.var_mean",),
    "matmul": ("torch.mm", "torch.matmul", "torch.bmm", "torch.einsum", "torch.dot", "torch.inner",
               "torch.mv", "torch.tensordot", "tensorflow.matmul", "tensorflow.linalg.matmul",
               "tensorflow.tensordot", "tensorflow.einsum", "keras.backend.dot", "keras.backend.batch_dot",
               "keras.ops.matmul", "keras.ops.dot", "keras.ops.einsum"),
    "addmm": ("torch.addmm", "torch.baddbmm"),
    "cosine_similarity": ("torch.cosine_similarity", "torch.nn.functional.cosine_similarity",
                          "keras.ops.cosine_similarity"),
    "normalize": ("torch.nn.functional.normalize", "tensorflow.math.l2_normalize", "tensorflow.nn.l2_normalize",
                  "keras.backend.l2_normalize"),
    "norm": ("torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "tensorflow.norm",
             "tensorflow.linalg.norm", "torch.cdist", "torch.dist", "torch.nn.functional.pairwise_distance"),
    "max": ("torch.amax", "tensorflow.reduce_max", "tensorflow.math.reduce_max", "keras.backend.max",
            "keras.ops.max", "torch.logsumexp", "tensorflow.reduce_logsumexp", "tensorflow.math.reduce_logsumexp"),
    "isfinite": ("torch.isinf", "torch.isnan", "torch.isfinite", "torch.isposinf", "torch.isneginf",
                 "tensorflow.is_inf", "tensorflow.math.is_inf", "tensorflow.is_nan", "tensorflow.math.is_nan",
                 "tensorflow.is_finite", "tensorflow.math.is_finite"),
    "nan_to_num": ("torch.nan_to_num", "keras.ops.nan_to_num"),
    "compare": ("torch.eq", "torch.ne", "torch.gt", "torch.ge", "torch.lt", "torch.le", "torch.not_equal",
                "torch.greater", "torch.greater_equal", "torch.less", "torch.less_equal",
                "torch.logical_not", "torch.logical_and", "torch.logical_or",
                "tensorflow.equal", "tensorflow.not_equal", "tensorflow.greater", "tensorflow.greater_equal",
                "tensorflow.less", "tensorflow.less_equal", "tensorflow.math.equal", "tensorflow.math.not_equal",
                "tensorflow.math.greater", "tensorflow.math.greater_equal", "tensorflow.math.less",
                "tensorflow.math.less_equal", "tensorflow.logical_not", "tensorflow.math.logical_not",
                "tensorflow.logical_and", "tensorflow.math.logical_and", "tensorflow.sequence_mask"),
    "cast": ("tensorflow.cast", "tensorflow.to_float", "keras.backend.cast", "keras.ops.cast"),
    "reshape": ("torch.unsqueeze", "torch.reshape", "tensorflow.expand_dims", "tensorflow.reshape",
                "keras.backend.expand_dims", "keras.ops.expand_dims"),
    "nll_loss": ("torch.nn.functional.nll_loss",),
    "softplus": ("torch.nn.functional.softplus", "tensorflow.math.softplus", "tensorflow.nn.softplus",
                 "keras.backend.softplus", "keras.ops.softplus"),
    "no_grad": ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"),
    "set_grad_enabled": ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"),
}

QUALNAME_TO_OP: dict[str, str] = {q: op for op, names in _FUNCTIONS.items() for q in names}

# Tensor methods: attribute -> (op, least, most positional arguments, keywords that may
# stand in for a positional one). Arity is what keeps `self.log("loss", v)` or
# `logger.exp(...)` from counting.
_ANY = 99
METHODS: dict[str, tuple[str, int, int]] = {
    "log": ("log", 0, 0), "log2": ("log2", 0, 0), "log10": ("log10", 0, 0), "log1p": ("log1p", 0, 0),
    "exp": ("exp", 0, 0), "expm1": ("expm1", 0, 0), "sqrt": ("sqrt", 0, 0), "rsqrt": ("rsqrt", 0, 0), "reciprocal": ("reciprocal", 0, 0),
    "sigmoid": ("sigmoid", 0, 0), "square": ("square", 0, 0), "abs": ("abs", 0, 0), "relu": ("relu", 0, 0),
    "acos": ("acos", 0, 0), "arccos": ("acos", 0, 0), "asin": ("asin", 0, 0), "arcsin": ("asin", 0, 0),
    "atanh": ("atanh", 0, 0), "arctanh": ("atanh", 0, 0),
    "softmax": ("softmax", 0, 2), "log_softmax": ("log_softmax", 0, 2),
    "sum": ("sum", 0, _ANY), "nansum": ("sum", 0, _ANY), "mean": ("mean", 0, _ANY), "nanmean": ("mean", 0, _ANY),
    "count_nonzero": ("count_nonzero", 0, 1),
    "pow": ("pow", 1, 1), "float_power": ("pow", 1, 1),
    "where": ("where", 2, 2), "masked_fill": ("masked_fill", 2, 2),
    "clamp": ("clamp", 0, 2), "clip": ("clamp", 0, 2), "clamp_min": ("clamp_min", 1, 1),
    "std": ("std", 0, 2), "var": ("var", 0, 2),
    "norm": ("norm", 0, 3), "amax": ("max", 0, 2), "max": ("max", 0, 2), "logsumexp": ("max", 0, 2),
    "isinf": ("isfinite", 0, 0), "isnan": ("isfinite", 0, 0), "isfinite": ("isfinite", 0, 0),
    "nan_to_num": ("nan_to_num", 0, 3),
    "mm": ("matmul", 1, 1), "matmul": ("matmul", 1, 1), "bmm": ("matmul", 1, 1), "dot": ("matmul", 1, 1),
    "addmm": ("addmm", 2, 4), "addmm_": ("addmm", 2, 4), "baddbmm": ("addmm", 2, 4), "baddbmm_": ("addmm", 2, 4),
    "eq": ("compare", 1, 1), "ne": ("compare", 1, 1), "gt": ("compare", 1, 1), "ge": ("compare", 1, 1),
    "lt": ("compare", 1, 1), "le": ("compare", 1, 1), "logical_not": ("compare", 0, 0),
    "div": ("div", 1, 1), "divide": ("div", 1, 1), "true_divide": ("div", 1, 1),
}

# Calls that change dtype, device or shape but not the values that matter for a zero test.
WRAPPER_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "to", "type", "type_as", "detach", "clone", "contiguous",
    "unsqueeze", "view", "reshape", "squeeze", "expand", "expand_as", "view_as", "reshape_as", "long", "int",
    "cpu", "cuda", "flatten", "t", "transpose", "permute", "item",
})


_FRAMEWORK_ROOTS = frozenset({"torch", "tensorflow", "keras", "tf_keras", "functorch"})


def _normalise(qualname: str) -> str:
    for prefix in ("tensorflow.compat.v1.", "tensorflow.compat.v2.", "tensorflow._api.v2."):
        if qualname.startswith(prefix):
            return "tensorflow." + qualname[len(prefix):]
    for prefix in ("tensorflow.keras.", "tf_keras."):
        if qualname.startswith(prefix):
            return "keras." + qualname[len(prefix):]
    return qualname


def framework_of(qualname: str) -> str:
    return TORCH if qualname.startswith("torch") else TF


@dataclass
class OpCall:
    """A call recognised as a tensor op, with uniform access to its operands.

    For the method form the receiver is operand 0: `x.pow(2)` and `torch.pow(x, 2)`
    both have ``operand(0) is x`` and ``operand(1) == 2``.
    """

    op: str
    node: ast.Call
    framework: str  # TORCH, TF or METHOD
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

    def spelling(self, qualname: str) -> str | None:
        """How module `qualname` can be written in this file using module-level imports.

        ``spelling("torch.nn.functional")`` is 'F' after ``import torch.nn.functional as F``,
        'torch.nn.functional' after ``import torch``; None when the file cannot name it.
        """
        best: str | None = None
        for local, target in self.module_level.items():
            if target == qualname:
                candidate = local
            elif qualname.startswith(target + ".") and target in ("torch", "tensorflow", "keras"):
                candidate = local + qualname[len(target):]
            else:
                continue
            if best is None or len(candidate) < len(best):
                best = candidate
        return best


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
    if isinstance(func, ast.Name):
        qual = imports.aliases.get(func.id)
        if qual is None:
            return None
        qual = _normalise(qual)
        op = QUALNAME_TO_OP.get(qual)
        if op is not None:
            return OpCall(op, call, framework_of(qual), qual)
    return None
