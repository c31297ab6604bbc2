"""The audit on the development corpus (`corpus/`: 40 programs built from public NaN reports,
each with its fixed twin, split into a half tuned on and a half held out): the origin line is
flagged before the program runs, and the fixed twins are clean.

The figures of the README (37 of 40 origins, 0 findings on the twins) were measured on this
corpus; the held-out half was audited after the tuning, not tuned on. A drop below them fails.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from nanguard.torch.auditor import audit_script

pytestmark = pytest.mark.slow
CORPUS = Path(__file__).resolve().parent / "corpus"
ENTRIES = json.loads((CORPUS / "corpus.json").read_text())
# the three origins the audit misses today: a var over a dimension that is 1 only for other
# input shapes (shapes are the traced run's), and two held-out programs
KNOWN_MISSES = {"evonorm_instance_var", "temperature_scaling_calib", "candidate_masked_log_softmax"}


def _origin(path: Path) -> int:
    (line,) = [i + 1 for i, text in enumerate(path.read_text().splitlines()) if text.rstrip().endswith("# ORIGIN")]
    return line


def _audit(path: Path):
    with contextlib.redirect_stdout(io.StringIO()):
        return audit_script(str(path), witness=False)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_origin_is_flagged_and_the_fixed_twin_is_clean(entry) -> None:
    bug = CORPUS / f"{entry['name']}_bug.py"
    result = _audit(bug)
    assert result.script_error is None, result.script_error
    lines = {f.line for f in result.findings if Path(f.file).resolve() == bug.resolve()}
    if entry["name"] not in KNOWN_MISSES:
        assert _origin(bug) in lines, f"{entry['name']}: origin {_origin(bug)} not among {sorted(lines)}"
    fixed = _audit(CORPUS / f"{entry['name']}_fixed.py")
    assert fixed.findings == [], str(fixed)
