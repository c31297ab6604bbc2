"""Compare nested float lists with an exact expectation, with no framework."""

from __future__ import annotations

import math
from typing import List, Tuple

from nanguard.core.vectors import ulp


def shape_and_flat(data) -> Tuple[Tuple[int, ...], List[float]]:
    if isinstance(data, (list, tuple)):
        parts = [shape_and_flat(item) for item in data]
        shapes = {shape for shape, _ in parts}
        if len(shapes) > 1:
            raise ValueError(f"ragged nested list: {data!r}")
        inner = shapes.pop() if shapes else ()
        return (len(data),) + inner, [x for _, flat in parts for x in flat]
    return (), [float(data)]


def _matches(a: float, e: float, within) -> bool:
    """An expected NaN must be NaN and an expected infinity that infinity; numbers within(e)."""
    if math.isnan(e) or math.isnan(a):
        return math.isnan(e) and math.isnan(a)
    if math.isinf(e) or math.isinf(a):
        return a == e
    return abs(a - e) <= within(e)


def _assert_entries(actual, expected, within, what: str) -> None:
    a_shape, a_flat = shape_and_flat(actual)
    e_shape, e_flat = shape_and_flat(expected)
    assert a_shape == e_shape, f"{what}: shape {a_shape} != {e_shape}"
    bad = [(i, a, e) for i, (a, e) in enumerate(zip(a_flat, e_flat)) if not _matches(a, e, within)]
    assert not bad, f"{what}: {len(bad)} of {len(e_flat)} entries differ, first (index, actual, expected): {bad[:3]}"


def assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:
    """|actual - expected| <= atol + rtol * |expected| entrywise; NaN and infinities must match exactly."""
    _assert_entries(actual, expected, lambda e: atol + rtol * abs(e), what)


def assert_within_ulps(actual, expected, ulps: float, dtype: str, what: str) -> None:
    """|actual - expected| <= ulps units in the last place of ``expected`` in ``dtype``."""
    _assert_entries(actual, expected, lambda e: ulps * ulp(e, dtype), f"{what} (within {ulps} ulps)")


def all_finite(data) -> bool:
    return all(math.isfinite(x) for x in shape_and_flat(data)[1])
