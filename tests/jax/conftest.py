"""The JAX suite runs only where JAX is installed."""

import pytest

pytest.importorskip("jax")
