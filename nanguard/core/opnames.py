"""Short names of ops, for headlines and messages: ``aten.sqrt.default`` -> ``sqrt``.

TensorFlow's op types (``Sqrt``) and JAX's primitives (``div``) are short already; PyTorch's
aten overload names are shortened here, without torch, so a report reads the same wherever
it is printed (`nanguard.core.report` needs no backend).

    >>> op_base("aten._softmax.default"), op_base("aten.add_.Tensor"), op_base("Sqrt")
    ('softmax', 'add', 'Sqrt')
"""

from __future__ import annotations

from typing import Dict

_RENAMES: Dict[str, str] = {
    "_softmax": "softmax", "_log_softmax": "log_softmax", "_to_copy": "to", "addmm": "linear",
    "_softmax_backward_data": "softmax", "linalg_vector_norm": "norm", "special_xlogy": "xlogy",
    "_scaled_dot_product_flash_attention_for_cpu": "scaled_dot_product_attention",
    "_scaled_dot_product_efficient_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention": "scaled_dot_product_attention"}


def op_base(op_name: str) -> str:
    """``aten.sqrt.default`` -> ``sqrt``; ``aten.add_.Tensor`` -> ``add``; ``aten._softmax`` -> ``softmax``."""
    name = op_name.split(".")[1] if op_name.startswith("aten.") else op_name.split(".")[0]
    name = _RENAMES.get(name, name)
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


__all__ = ["op_base"]
