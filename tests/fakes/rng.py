"""Seeded randomness for deterministic jitter in tests."""

import random


def seeded(seed: int) -> random.Random:
    """A reproducible jitter source (not cryptography)."""
    return random.Random(seed)  # noqa: S311
