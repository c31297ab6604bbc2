"""The ``backend`` fixture: every contract test runs once per installed backend."""

from __future__ import annotations

import pytest

from tests.contract import backends

ALL = [name for name, _, _ in backends.ADAPTERS]
INSTALLED = set(backends.available())


@pytest.fixture(params=ALL)
def backend(request):
    if request.param not in INSTALLED:
        pytest.skip(f"{request.param} is not installed")
    return backends.load(request.param)
