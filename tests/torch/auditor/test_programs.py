"""The detector's catalogue of bug programs, audited before they run: every bug is flagged at
its line; on each program's fixed twin, every finding left has a witness (a real risk)."""

from __future__ import annotations

import pytest

from nanguard.torch.auditor import audit
from tests.torch.detector import programs as P

CASES = P.CATALOGUE + P.STORY_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bug_is_flagged_at_its_line(case) -> None:
    result = audit(case.fn, witness=False)
    lines = [(f.file, f.line) for f in result.findings]
    assert (case.file, case.line) in lines, f"{case.name}: {lines}\n{result}"


@pytest.mark.parametrize("name", sorted(P.FIXED))
def test_fixed_twin_has_no_finding_without_a_witness(name: str) -> None:
    result = audit(P.FIXED[name], witness_budget=3.0)
    unwitnessed = [f for f in result.findings if f.witness is None]
    assert unwitnessed == [], f"{name}:\n{result}"
