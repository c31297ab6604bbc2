"""The JAX tests run only where JAX is installed (`pip install 'nanguard[jax]'`)."""

import pytest

pytest.importorskip("jax")
