"""The table of recognised tensor operations: canonical op -> the functions that compute it.

Rules never match bare names: a call counts as `log` only when its function resolves,
through the file's imports (`nanguard.lint.names`), to one of the qualified names below, or
when it is a tensor method of the right arity. PyTorch, TensorFlow and Keras spell each op
their own way; JAX (`jax.numpy`, `jax.nn`) and NumPy share NumPy's spelling. Each call's
framework decides the wording of its advice (`framework_of`).
"""

from __future__ import annotations

TORCH = "torch"
TF = "tf"
KERAS = "keras"
JAX = "jax"
NUMPY = "numpy"
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
    "tanh": ("torch.tanh", "torch.nn.functional.tanh", "tensorflow.tanh", "tensorflow.math.tanh",
             "tensorflow.nn.tanh", "keras.backend.tanh", "keras.activations.tanh", "keras.ops.tanh"),
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
    # torch.min(x, other) is elementwise; torch.min(x, dim) a reduction (patterns._binary_min)
    "minimum": ("torch.minimum", "torch.min", "torch.fmin", "tensorflow.minimum",
                "tensorflow.math.minimum", "keras.backend.minimum", "keras.ops.minimum"),
    "div": ("torch.div", "torch.divide", "torch.true_divide", "tensorflow.divide", "tensorflow.math.divide",
            "tensorflow.truediv", "tensorflow.math.truediv", "tensorflow.realdiv", "keras.ops.divide",
            "keras.ops.true_divide"),
    "std": ("torch.std",),
    "var": ("torch.var",),
    "std_mean": ("torch.std_mean",),
    "var_mean": ("torch.var_mean",),
    "matmul": ("torch.mm", "torch.matmul", "torch.nn.functional.linear",
               "torch.bmm", "torch.einsum", "torch.dot", "torch.inner",
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
    "kl_div": ("torch.nn.functional.kl_div",),
    "mse_loss": ("torch.nn.functional.mse_loss",),
    "softplus": ("torch.nn.functional.softplus", "tensorflow.math.softplus", "tensorflow.nn.softplus",
                 "keras.backend.softplus", "keras.ops.softplus"),
    "no_grad": ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"),
    "set_grad_enabled": ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"),
}


# NumPy's spelling, shared by `jax.numpy` and `numpy`: op -> function names in that namespace.
_ARRAY_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "log": ("log",), "log2": ("log2",), "log10": ("log10",), "log1p": ("log1p",), "exp": ("exp",),
    "expm1": ("expm1",), "sqrt": ("sqrt",), "pow": ("power", "float_power"), "square": ("square",),
    "abs": ("abs", "absolute"), "acos": ("arccos", "acos"), "asin": ("arcsin", "asin"),
    "atanh": ("arctanh", "atanh"), "tanh": ("tanh",), "where": ("where",), "clamp": ("clip",), "maximum": ("maximum", "fmax"),
    "minimum": ("minimum", "fmin"),
    "div": ("divide", "true_divide"), "matmul": ("matmul", "dot", "einsum", "inner", "tensordot"),
    "sum": ("sum", "nansum"), "mean": ("mean", "nanmean"), "count_nonzero": ("count_nonzero",),
    "max": ("max", "amax"), "isfinite": ("isinf", "isnan", "isfinite", "isposinf", "isneginf"),
    "nan_to_num": ("nan_to_num",), "reshape": ("reshape", "expand_dims"), "norm": ("linalg.norm",),
    "std": ("std",), "var": ("var",),
    "compare": ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_not",
                "logical_and", "logical_or"),
}
_JAX_ONLY: dict[str, tuple[str, ...]] = {
    "softmax": ("jax.nn.softmax",), "log_softmax": ("jax.nn.log_softmax",),
    "sigmoid": ("jax.nn.sigmoid",), "relu": ("jax.nn.relu",), "softplus": ("jax.nn.softplus",),
    "max": ("jax.nn.logsumexp", "jax.scipy.special.logsumexp"),
    "stop_gradient": ("jax.lax.stop_gradient",),
}
for _op, _names in _ARRAY_FUNCTIONS.items():
    _FUNCTIONS[_op] = _FUNCTIONS.get(_op, ()) + tuple(f"{ns}.{n}" for n in _names for ns in ("jax.numpy", "numpy"))
for _op, _names in _JAX_ONLY.items():
    _FUNCTIONS[_op] = _FUNCTIONS.get(_op, ()) + _names
_FUNCTIONS["stop_gradient"] = _FUNCTIONS["stop_gradient"] + ("tensorflow.stop_gradient",)
_FUNCTIONS["norm"] += ("keras.ops.norm",)

QUALNAME_TO_OP: dict[str, str] = {q: op for op, names in _FUNCTIONS.items() for q in names}

# Tensor methods: attribute -> (op, least, most positional arguments, keywords that may
# stand in for a positional one). Arity is what keeps `self.log("loss", v)` or
# `logger.exp(...)` from counting.
_ANY = 99
METHODS: dict[str, tuple[str, int, int]] = {
    "log": ("log", 0, 0), "log2": ("log2", 0, 0), "log10": ("log10", 0, 0), "log1p": ("log1p", 0, 0),
    "exp": ("exp", 0, 0), "expm1": ("expm1", 0, 0), "sqrt": ("sqrt", 0, 0), "rsqrt": ("rsqrt", 0, 0),
    "reciprocal": ("reciprocal", 0, 0),
    "sigmoid": ("sigmoid", 0, 0), "tanh": ("tanh", 0, 0), "square": ("square", 0, 0), "abs": ("abs", 0, 0), "relu": ("relu", 0, 0),
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
    "cpu", "cuda", "flatten", "t", "transpose", "permute", "item", "astype", "repeat",
})



def framework_of(qualname: str) -> str:
    """The framework a qualified function name belongs to (TORCH, TF, KERAS, JAX or NUMPY)."""
    root = qualname.split(".", 1)[0]
    if root in ("torch", "functorch"):
        return TORCH
    if root == "keras":
        return KERAS
    if root == "jax":
        return JAX
    if root == "numpy":
        return NUMPY
    return TF
