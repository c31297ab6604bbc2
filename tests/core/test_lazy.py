"""The lazy name lookup of the backend packages (nanguard.tf, nanguard.jax)."""

from __future__ import annotations

import pytest

from nanguard._lazy import lazy_names


def test_names_come_from_their_pillar_once_and_unknown_names_raise() -> None:
    namespace: dict = {}
    getattr_, dir_ = lazy_names("nanguard", namespace, {"errors": ("NonFiniteError",), "core.hazards": ("HAZARDS",)})
    from nanguard.core.hazards import HAZARDS
    from nanguard.errors import NonFiniteError

    assert getattr_("NonFiniteError") is NonFiniteError
    assert namespace["NonFiniteError"] is NonFiniteError  # stored: later lookups skip getattr_
    assert getattr_("HAZARDS") is HAZARDS
    assert dir_() == ["HAZARDS", "NonFiniteError"]
    with pytest.raises(AttributeError, match="module 'nanguard' has no attribute 'sqrt'"):
        getattr_("sqrt")
