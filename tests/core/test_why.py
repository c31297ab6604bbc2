"""The shared explanation rules (`nanguard.core.why`), without a framework: the same summaries
give the same hazard and the same words whichever backend adapts them."""

from __future__ import annotations

from typing import Optional, Tuple

from nanguard.core.summary import TensorSummary
from nanguard.core.why import Facts, Probe, diagnose, words


def _s(name: str = "x", *, zeros: int = 0, negative: int = 0, neginf: int = 0, posinf: int = 0, numel: int = 4,
       lo: Optional[float] = 0.0, hi: Optional[float] = 1.0, dtype: str = "float32") -> TensorSummary:
    return TensorSummary(name=name, shape=(numel,), dtype=dtype, device="cpu", numel=numel, min=lo, max=hi,
                         zeros=zeros, negative=negative, neginf=neginf, posinf=posinf)


def _facts(phase: str, kind: str, name: str, *inputs: TensorSummary, framework: str = "torch",
           probe: Optional[Probe] = None, counted: bool = True) -> Facts:
    return Facts(phase=phase, kind=kind, names=(name,), framework=framework, inputs=list(inputs),
                 forward_inputs=list(inputs) if phase == "backward" else [], probe=probe or Probe(),
                 counted=counted, fn=name, node=f"{name} node", op_name=name)


def test_the_same_facts_name_the_same_hazard_in_every_framework() -> None:
    x = _s(zeros=2)
    for framework in ("torch", "tf", "jax"):
        said = diagnose(_facts("backward", "inf", "sqrt", x, framework=framework))
        assert (said.key, said.evidence) == ("sqrt_zero", "backward")
        why, fix = words(said, framework)
        assert why.startswith("2 of 4") and fix.endswith(".")
    assert "nanguard.tf." in words(diagnose(_facts("backward", "inf", "sqrt", x)), "tf")[1]


class _Rows(Probe):
    def masked_rows(self) -> Optional[Tuple[int, int]]:
        return 3, 8


def test_a_probe_supplies_what_summaries_cannot_say() -> None:
    x = _s(neginf=4)
    plain = diagnose(_facts("forward", "nan", "softmax", x, framework="jax"))
    assert (plain.key, plain.evidence) == ("softmax_masked_row", "neginf")
    rows = diagnose(_facts("forward", "nan", "softmax", x, framework="jax", probe=_Rows()))
    assert (rows.evidence, rows.fields["rows"], rows.fields["total"]) == ("forward", 3, 8)
    assert rows.fields["fn"] == "nanguard.jax.softmax"


def test_values_not_read_fall_back_to_what_the_op_presumes() -> None:
    x = TensorSummary(name="x", shape=(4,), dtype="float32", device="", numel=4, counted=False)
    assert diagnose(_facts("forward", "nan", "log", x, counted=False)).key == "log_negative"
    assert diagnose(_facts("forward", "inf", "log", x, counted=False)).key == "log_zero"
    assert diagnose(_facts("forward", "inf", "log", _s(zeros=1))).evidence == "forward"


def test_an_unknown_op_is_unexplained_and_huge_inputs_say_diverged() -> None:
    said = diagnose(_facts("forward", "nan", "frobnicate", _s()))
    assert said.key == "unexplained" and said.fields["op"] == "frobnicate"
    big = diagnose(_facts("forward", "inf", "matmul", _s(lo=-1e30, hi=1e30)))
    assert big.key == "diverged_scale"


def test_a_broken_rule_never_hides_the_finding() -> None:
    class Broken(Probe):
        def root(self) -> Tuple[str, dict]:
            raise RuntimeError("boom")

    said = diagnose(_facts("forward", "nan", "sqrt", _s(negative=1, lo=-1.0), probe=Broken()))
    assert said.key == "unexplained"
