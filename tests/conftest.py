import os

from hypothesis import HealthCheck, settings

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
