"""The two hypothesis profiles every model-based test runs under.

`make test` runs the bounded `default` profile (derandomized, no example database: the same
examples every run); `make harden`'s `model` suite sets `LAKEGATE_MODEL_PROFILE=harden` (random,
longer). Each model's profiles are named apart from hypothesis' own "default" profile, which
registering would replace for every test of the run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def model_settings(name: str, *, default: tuple[int, int], harden: tuple[int, int]) -> settings:
    """Register `<name>-default` and `<name>-harden` ((examples, steps) each) and return the
    one `LAKEGATE_MODEL_PROFILE` picks (default: `default`)."""
    for profile, (examples, steps) in (("default", default), ("harden", harden)):
        settings.register_profile(
            f"{name}-{profile}", max_examples=examples, stateful_step_count=steps,
            deadline=None, derandomize=profile == "default", database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
    return settings.get_profile(f"{name}-{os.environ.get('LAKEGATE_MODEL_PROFILE', 'default')}")
