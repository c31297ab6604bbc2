"""The demo section replays the seeds' story with real training runs."""

from __future__ import annotations

import io
import re

from nanguard.demo import SECTIONS, Show
from nanguard.demo import recover


def test_recover_section_is_registered():
    assert "nanguard.demo.recover" in SECTIONS


def test_recover_demo_tells_the_story():
    out = io.StringIO()
    recover.run(Show(out))
    text = out.getvalue()
    # the naive loop is poisoned for good
    assert "NaN in encoder.weight" in text and "(steps 14..30): nan" in text
    # the guarded loop skips exactly that step, names the parameter and summarises
    assert "step 13: non-finite gradients in encoder.weight (32 NaN of 32) -> skipped" in text
    assert "30 steps, 29 applied, 1 skipped, 0 zeroed" in text
    assert "parameters: all finite" in text
    # torch's clip poisons all gradients, the guarded one does not
    assert "3 of 3 gradients now entirely NaN" in text
    # the early warning comes before the first non-finite gradient
    warned = int(re.search(r"GradientGrowthWarning at step (\d+)", text).group(1))
    first_bad = int(re.search(r"first non-finite gradient: step (\d+)", text).group(1))
    assert 61 <= warned < first_bad
    assert "growth started in `head`" in text
