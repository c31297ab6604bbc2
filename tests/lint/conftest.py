"""Shared helpers for the lint tests: lint a snippet under the usual imports, get codes back."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

from nanguard.lint import lint_source

HEADER = """\
import math
import numpy as np
import torch
import torch.nn.functional as F
import tensorflow as tf
"""


def _codes(body: str, header: str = HEADER) -> list[str]:
    source = header + textwrap.dedent(body)
    return [f.code for f in lint_source(source)]


@pytest.fixture
def codes() -> Callable[..., list[str]]:
    """codes(body) -> rule codes reported for `body` placed after the standard imports."""
    return _codes
