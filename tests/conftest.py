import importlib.util
import os

from hypothesis import HealthCheck, settings

# One torch thread for the whole suite: tests run two at a time (`-n 2`) on shared machines, and
# torch's default (a thread per core) oversubscribes them: one gradcheck of
# `nanguard.torch.distance_matrix` took 12 s with one thread and 273 s with the default under
# load (issue 29; `benchmarks/gradcheck_threads.py`). Only torch is imported here: TensorFlow
# and JAX load with the tests that need them.
if importlib.util.find_spec("torch") is not None:
    import torch

    torch.set_num_threads(1)

# Deterministic by default so CI cannot flake; NANGUARD_HYPOTHESIS=thorough explores more.
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("NANGUARD_HYPOTHESIS", "ci"))
