"""LibreTranslate's own language codes, read as the BCP 47 codes this service uses.

LibreTranslate names languages by its Argos Translate packages' codes, and two of them are no
BCP 47 code: ``zt`` (Chinese, traditional) and ``pb`` (Portuguese, Brazil). A client that
learnt them from a LibreTranslate server (or has them written in, as subtitle and e-book
tools do) sent them here and got "not a supported language". They are read on the
LibreTranslate routes only: elsewhere ``pb`` is no language at all.
"""

from __future__ import annotations

from typing import Any

LIBRE_CODES = {"zt": "zh-Hant", "pb": "pt-BR"}


def libre_code(code: Any) -> Any:
    """``code`` as the service reads it: LibreTranslate's ``zt`` and ``pb`` (any case, spaces
    around them) as ``zh-Hant`` and ``pt-BR``; any other value (a number, null, another
    code) as it came, for the usual checks."""
    if not isinstance(code, str):
        return code
    return LIBRE_CODES.get(code.strip().lower(), code)
