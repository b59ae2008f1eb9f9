"""Variable-length test texts: short and long mixed, as real translation traffic is."""

from __future__ import annotations

import random

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "hello",
    "world",
    "says",
    "good",
    "morning",
]


def texts(n: int, low: int, high: int, seed: int = 11) -> list[str]:
    """``n`` texts of ``low`` to ``high`` words, reproducible for a given seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(low, high))) for _ in range(n)]
