"""TensorFlow tests: skipped as a whole where TensorFlow is not installed."""
import pytest

pytest.importorskip("tensorflow")
