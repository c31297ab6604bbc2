"""float64 for the gradient checks and properties: inside ``jax.enable_x64``, test by test."""

import jax
import pytest


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield
