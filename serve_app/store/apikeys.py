"""API key secrets: how they are made and how they are known without being stored.

A secret is 32 random bytes (URL-safe text with a recognisable prefix). The store keeps its
SHA-256 digest only: the secret has full entropy, so a fast hash cannot be brute-forced,
and a lookup by digest is one indexed read. Keys configured in the environment (or a key
file) have no stored record; their usage is counted under ``env_key_id``, derived from the
digest, so the counters never hold the secret either.
"""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "mtk_"


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(secret: str | bytes) -> bytes:
    raw = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(raw).digest()


def env_key_id(secret_digest: bytes) -> str:
    """The id under which an environment key's usage is counted (not reversible)."""
    return "env-" + secret_digest.hex()[:16]
