"""TensorFlow tests: skipped cleanly when TensorFlow is not installed."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("tensorflow")
