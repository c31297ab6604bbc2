"""optax, imported on first use: nanguard does not depend on it, the guard needs it."""

from __future__ import annotations

from types import ModuleType


def optax_module() -> ModuleType:
    try:
        import optax
    except ImportError as error:
        raise ImportError(
            "nanguard.jax.guard wraps an optax GradientTransformation and needs optax, which is "
            "not installed. Install it with `pip install optax` (or `pip install 'nanguard[jax]'`)."
        ) from error
    return optax
