"""What a report says about a tensor, without the tensor: shape, dtype, range, special values.

Every backend reduces its tensors to these summaries (``nanguard.torch.detector.values.summarize``
for torch); the report, the explanations and the JSON output work from summaries only, so
they are the same for every framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple


def format_number(v: Optional[float]) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if v != v or v in (math.inf, -math.inf):
        return str(v)
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}"


@dataclass
class TensorSummary:
    """Shape, dtype, device, range and the count of each kind of special value."""

    name: str
    shape: Tuple[int, ...]
    dtype: str
    device: str
    numel: int
    min: Optional[float] = None
    max: Optional[float] = None
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0
    negative: int = 0
    first_bad: Optional[Tuple[int, ...]] = None
    role: str = "input"
    # False when only shape and dtype are known: the values were not read (under XLA, reading
    # them inside the compiled step would change how XLA rounds it)
    counted: bool = True

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.posinf == 0 and self.neginf == 0

    def to_dict(self) -> Dict[str, Any]:
        known = self.counted
        return {
            "name": self.name, "role": self.role, "shape": list(self.shape), "dtype": self.dtype,
            "device": self.device, "numel": self.numel, "min": self.min, "max": self.max,
            "nan": self.nan if known else None, "posinf": self.posinf if known else None,
            "neginf": self.neginf if known else None, "zeros": self.zeros if known else None,
            "negative": self.negative if known else None,
            "first_bad_index": list(self.first_bad) if self.first_bad is not None else None,
            "counted": known,
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TensorSummary":
        """The inverse of `to_dict`: counts written as None (values not read) come back as 0."""
        first = d.get("first_bad_index")
        return cls(name=d["name"], shape=tuple(d["shape"]), dtype=d["dtype"], device=d["device"],
                   numel=d["numel"], min=d.get("min"), max=d.get("max"), nan=d.get("nan") or 0,
                   posinf=d.get("posinf") or 0, neginf=d.get("neginf") or 0, zeros=d.get("zeros") or 0,
                   negative=d.get("negative") or 0, first_bad=tuple(first) if first is not None else None,
                   role=d.get("role", "input"), counted=d.get("counted", True))

    def type_str(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"

    def line(self) -> str:
        if not self.counted:
            return f"{self.type_str()}  (values not recorded)"
        parts = [self.type_str()]
        if self.min is not None:
            parts.append(f"min {format_number(self.min)}")
            parts.append(f"max {format_number(self.max)}")
        parts.append(f"zeros {self.zeros}")
        parts.append(f"nan {self.nan}")
        inf = f"inf {self.posinf + self.neginf}"
        if self.posinf and self.neginf:
            inf += f" (+{self.posinf} / -{self.neginf})"
        elif self.neginf:
            inf += " (all -inf)"
        parts.append(inf)
        text = "  ".join(parts)
        if self.first_bad is not None:
            text += f"  (first at [{', '.join(str(i) for i in self.first_bad)}])"
        return text


@dataclass
class ScalarArg:
    """A non-tensor argument worth showing (a Python number such as a fill value or exponent)."""

    name: str
    value: float

    def to_dict(self) -> Dict[str, Any]:
        v = self.value
        return {"name": self.name, "value": v if math.isfinite(v) else str(v)}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ScalarArg":
        """The inverse of `to_dict` (a non-finite value was written as a string: ``"inf"``)."""
        return cls(d["name"], float(d["value"]))
