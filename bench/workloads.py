"""Benchmark workloads: reproducible translation requests of controlled lengths.

``uniform`` gives every text about the same length (the seeds' misleading 15 RPS came from
such inputs); ``variable`` mixes short and long texts (10-200 tokens), as real traffic does;
``html`` is ``variable``'s texts as social-media posts (Mastodon's HTML: paragraphs, an
@mention, a link, a #hashtag; ``format: html``), the same words and forced output lengths.
Texts are drawn from small word lists in several languages, so the requests are multilingual
and the tokenizer sees Latin, CJK and Cyrillic scripts. Lengths are counted with the served
model's tokenizer when one is given, so every system gets the same token counts.

Each item also carries its forced output length (``output_tokens``): with random weights
every system is asked to generate exactly that many tokens (``min_tokens = max_tokens``,
``ignore_eos``), so they all do the same work.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal

WorkloadKind = Literal["uniform", "variable", "html"]

# A few dozen everyday words per language; the sentences are nonsense but tokenize like text.
_SENTENCES = {
    "en": "the weather is lovely today and we will meet at the station before the train leaves "
    "for the city where our friends are waiting with news about the project and the market",
    "de": "das Wetter ist heute schön und wir treffen uns am Bahnhof bevor der Zug in die Stadt "
    "fährt wo unsere Freunde mit Neuigkeiten über das Projekt und den Markt warten",
    "fr": "le temps est magnifique aujourd'hui et nous nous retrouverons à la gare avant que le "
    "train parte pour la ville où nos amis attendent des nouvelles du projet et du marché",
    "es": "el tiempo es precioso hoy y nos veremos en la estación antes de que el tren salga "
    "hacia la ciudad donde nuestros amigos esperan noticias del proyecto y del mercado",
    "ru": "сегодня прекрасная погода и мы встретимся на вокзале до отправления поезда в город "
    "где наши друзья ждут новостей о проекте и о рынке",
}
_CJK_TEXT = {
    "zh": "今天天气很好我们将在火车离开前在车站见面朋友们正在城市里等待关于项目和市场的消息",
    "ja": "今日はとても良い天気です電車が出る前に駅で会いましょう"
    "友達が町で計画と市場の知らせを待っています",
}
WORDS: dict[str, list[str]] = {
    **{lang: text.split(" ") for lang, text in _SENTENCES.items()},
    **{lang: list(text) for lang, text in _CJK_TEXT.items()},
}
TARGETS: dict[str, list[str]] = {
    "en": ["de", "fr", "zh", "ja", "es"],
    "de": ["en", "fr"],
    "fr": ["en", "de"],
    "es": ["en", "pt-BR"],
    "ru": ["en", "de"],
    "zh": ["en", "ja"],
    "ja": ["en", "zh"],
}
_CJK = {"zh", "ja"}

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Item:
    """One request of a workload."""

    text: str
    source_lang: str
    target_lang: str
    input_tokens: int  # tokens of the text alone (the prompt adds the template)
    output_tokens: int  # forced output length
    format: str = "text"  # the native API's format: text or html

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def word_count_estimate(text: str) -> int:
    """Token estimate when no tokenizer is given: ~1.3 tokens per word, 1 per CJK char."""
    if any("\u3000" <= ch <= "\u9fff" for ch in text):
        return len(text)
    return max(1, round(len(text.split()) * 1.3))


def _text_of_length(rng: random.Random, lang: str, tokens: int, count: TokenCounter) -> str:
    words, sep = WORDS[lang], "" if lang in _CJK else " "
    parts: list[str] = []
    while True:
        parts.append(rng.choice(words))
        text = sep.join(parts)
        if count(text) >= tokens:
            return text


def make_workload(
    kind: WorkloadKind,
    n: int,
    *,
    seed: int = 0,
    count_tokens: TokenCounter | None = None,
    low: int = 10,
    high: int = 200,
    uniform_tokens: int = 100,
    output_ratio: float = 1.0,
) -> list[Item]:
    """``n`` items: ``variable`` lengths uniform in [low, high] tokens, or all
    ``uniform_tokens``; a translation is about as long as its source (``output_ratio``);
    ``html``: the ``variable`` items as posts (``as_post``)."""
    if kind == "html":
        plain = make_workload(
            "variable", n, seed=seed, count_tokens=count_tokens, low=low, high=high,
            output_ratio=output_ratio,
        )  # fmt: skip
        rng = random.Random(seed + 1)
        return [replace(i, text=as_post(rng, i.text, i.source_lang), format="html") for i in plain]
    rng = random.Random(seed)
    count = count_tokens or word_count_estimate
    items = []
    for _ in range(n):
        lang = rng.choice(list(WORDS))
        target = rng.choice(TARGETS[lang])
        wanted = uniform_tokens if kind == "uniform" else rng.randint(low, high)
        text = _text_of_length(rng, lang, wanted, count)
        n_in = count(text)
        items.append(Item(text, lang, target, n_in, max(1, round(output_ratio * n_in))))
    return items


_POST_HANDLES = ("alice", "bob", "carol", "dmitri", "mei")


def as_post(rng: random.Random, text: str, lang: str) -> str:
    """``text`` as a Mastodon status: a mention first, a link and a hashtag inside, split
    into two paragraphs when long; its words are unchanged and in order."""
    sep = "" if lang in _CJK else " "
    words = list(text) if lang in _CJK else text.split(" ")
    handle = rng.choice(_POST_HANDLES)
    mention = (
        f'<span class="h-card" translate="no"><a href="https://social.example/@{handle}" '
        f'class="u-url mention">@<span>{handle}</span></a></span>'
    )
    link = (
        f'<a href="https://news.example/{lang}/{rng.randint(1, 9999)}" target="_blank" '
        'rel="nofollow noopener noreferrer"><span class="invisible">https://</span>'
        f'<span class="">news.example/{lang}</span><span class="invisible"></span></a>'
    )
    tag = (
        f'<a href="https://social.example/tags/{lang}" class="mention hashtag" rel="tag">'
        f"#<span>{lang}</span></a>"
    )
    middle = len(words) // 2
    first, second = sep.join(words[:middle]), sep.join(words[middle:])
    if len(words) > 40:
        return f"<p>{mention} {first}</p><p>{link} {second} {tag}</p>"
    return f"<p>{mention} {first} {link} {second} {tag}</p>"


def tokenizer_counter(path: str) -> TokenCounter:
    """Counts tokens of a text alone, as the translation service does (no special tokens)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    return lambda text: len(tok.encode(text, add_special_tokens=False))
