"""The TensorFlow tests run only where TensorFlow is installed (`pip install 'nanguard[tf]'`)."""

import pytest

pytest.importorskip("tensorflow")
