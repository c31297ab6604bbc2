"""Compare nested float lists with an exact expectation, with no framework."""

from __future__ import annotations

import math
from typing import List, Tuple


def shape_and_flat(data) -> Tuple[Tuple[int, ...], List[float]]:
    if isinstance(data, (list, tuple)):
        parts = [shape_and_flat(item) for item in data]
        shapes = {shape for shape, _ in parts}
        if len(shapes) > 1:
            raise ValueError(f"ragged nested list: {data!r}")
        inner = shapes.pop() if shapes else ()
        return (len(data),) + inner, [x for _, flat in parts for x in flat]
    return (), [float(data)]


def assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:
    """|actual - expected| <= atol + rtol * |expected| entrywise; infinities must match exactly, NaN never."""
    a_shape, a_flat = shape_and_flat(actual)
    e_shape, e_flat = shape_and_flat(expected)
    assert a_shape == e_shape, f"{what}: shape {a_shape} != {e_shape}"
    bad = []
    for i, (a, e) in enumerate(zip(a_flat, e_flat)):
        if math.isinf(e) or math.isinf(a):
            ok = a == e
        else:
            ok = not math.isnan(a) and not math.isnan(e) and abs(a - e) <= atol + rtol * abs(e)
        if not ok:
            bad.append((i, a, e))
    assert not bad, f"{what}: {len(bad)} of {len(e_flat)} entries differ, first (index, actual, expected): {bad[:3]}"


def all_finite(data) -> bool:
    return all(math.isfinite(x) for x in shape_and_flat(data)[1])
