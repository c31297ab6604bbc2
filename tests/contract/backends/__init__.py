"""Adapters that run the framework-free contract (``nanguard.core.vectors``) on one backend.

Each adapter module defines ``BACKEND``, an object with:

* ``name`` and ``dtypes`` (the dtype names of ``nanguard.core.vectors.DTYPES`` it supports);
* ``value_and_grads(vector, dtype, create_graph=False)`` -> (value, [grad per input]) as
  nested Python float lists, the gradient of the vector's loss (``sum(out * weights)`` over
  the finite ``out``, or over every ``out`` for ``loss="sum"``), weights in ``out``'s dtype;
* ``second_derivative(vector, dtype)`` -> [nested float list per input], or None when the
  first derivative does not depend on the inputs;
* ``output_dtype(vector, dtype)`` -> the dtype name of the op's output;
* ``flushes_subnormals(dtype)`` -> True where the backend (in its mode) reads and writes
  subnormal numbers as 0, measured, not assumed: the vectors' ``flushed`` expectations apply;
* ``two_backward_paths``: True when the backend has a fast first-order backward beside the
  differentiable one (torch); ``value_and_grads(create_graph=...)`` then selects it.

A backend whose framework is not installed is skipped, not failed.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import List, Tuple

# backend name -> (framework module that must be importable, adapter module)
ADAPTERS: List[Tuple[str, str, str]] = [
    ("torch", "torch", "tests.contract.backends.torch_backend"),
    ("tf", "tensorflow", "tests.contract.backends.tf_backend"),
    ("jax", "jax", "tests.contract.backends.jax_backend"),
]


def available() -> List[str]:
    """Names of the backends whose framework is installed here."""
    return [name for name, framework, _ in ADAPTERS if importlib.util.find_spec(framework) is not None]


def load(name: str):
    for candidate, _, module in ADAPTERS:
        if candidate == name:
            return importlib.import_module(module).BACKEND
    raise KeyError(f"no contract adapter named {name!r}")
