"""The TensorFlow tests run only where TensorFlow is installed (`pip install 'nanguard[tf]'`)."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("tensorflow")
