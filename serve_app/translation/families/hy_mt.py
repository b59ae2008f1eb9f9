"""HY-MT1.5 (tencent/HY-MT1.5-1.8B, -7B) and Hunyuan-MT (tencent/Hunyuan-MT-7B).

The prompts are the model cards' (the READMEs of Tencent-Hunyuan/HY-MT and
Tencent-Hunyuan/Hunyuan-MT), byte for byte: the ZH<=>XX template (a Chinese instruction
naming the target in Chinese) when Chinese is on either side, the XX<=>XX one (English)
otherwise, in one user turn and no system prompt ("our model does not have the default
system_prompt"). HY-MT1.5's card adds templates for terminology intervention and contextual
translation (both Chinese); Hunyuan-MT-7B's documents none. Decoding is the cards'
recommendation (top_k 20, top_p 0.6, repetition_penalty 1.05, temperature 0.7).

HY-MT1.5's card also documents a formatted-translation template (``HyMtPrompts.formatted``): text
between ``<source></source>`` whose ``<sn></sn>`` tags mark formatted spans, answered as
``<target>...</target>``. Nothing uses it yet; it is here for translating markup.

Hunyuan-MT-Chimera-7B is refused (``unservable_model``): it does not translate a text, it
fuses several candidate translations of it into one (its card's prompt lists up to six,
numbered, after the source segment). Serving it would mean first producing those candidates
with another model (Hunyuan-MT-7B), several engine requests per text and a second engine per
replica; with only the source text it gets a prompt it was not trained on. A deployment that
configures it is stopped at config validation with a message naming the model to serve
instead.
"""

from __future__ import annotations

import re
from typing import ClassVar

from serve_app.core.config import SamplingConfig
from serve_app.translation.families.base import (
    NO_OPTIONS,
    ChatPrompt,
    Prompt,
    PromptFamily,
    PromptOptions,
)
from serve_app.translation.languages import Language
from serve_app.translation.markup.segment import DEFAULT_STYLE, Style

_HY_MT_LANGUAGES = (
    "zh", "en", "fr", "pt", "es", "ja", "tr", "ru", "ar", "ko", "th", "it", "de", "vi", "ms",
    "id", "tl", "hi", "zh-Hant", "pl", "cs", "nl", "km", "my", "fa", "gu", "ur", "te", "mr",
    "he", "bn", "ta", "uk", "bo", "kk", "mn", "ug", "yue",
)  # fmt: skip
_CHINESE = frozenset({"zh", "zh-Hant", "yue"})
_FRAME = ("<source>", "</source>", "<target>", "</target>")


class HyMtPrompts(PromptFamily):
    """HY-MT1.5 / Hunyuan-MT: the model cards' ZH<=>XX and XX<=>XX prompts."""

    name: ClassVar[str] = "hy_mt"
    languages: ClassVar[tuple[str, ...]] = _HY_MT_LANGUAGES
    # The model cards' recommended decoding.
    sampling: ClassVar[SamplingConfig] = SamplingConfig(
        temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05
    )
    english = "Translate the following segment into {target}, without additional explanation."
    chinese = "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释："
    # HY-MT1.5's card: terminology intervention (one line per term; the card shows one) and
    # contextual translation. The card's context template ends with an empty line.
    terms = "参考下面的翻译：\n{terms}\n\n"
    term = "{source} 翻译成 {target}"
    context = (
        "{context}\n参考上面的信息，把下面的文本翻译成{target}，"
        "注意不需要翻译上文，也不要额外解释：\n{text}\n"
    )
    supports: frozenset[str] = frozenset({"glossary", "context"})
    # HY-MT1.5's card: the formatted-translation template (the card's example names Chinese
    # as the target); its placeholders are <sN></sN> tags and the answer comes in <target>.
    formatted: str | None = (
        "将以下<source></source>之间的文本翻译为{target}，注意只需要输出翻译后的结果，"
        "不要额外解释，原文中的<sn></sn>标签表示标签内文本包含格式信息，"
        "需要在译文中相应的位置尽量保留该标签。输出格式为：<target>str</target>\n\n"
        "<source>{text}</source>"
    )
    placeholders: ClassVar[Style] = Style("s", void_as_pair=True)

    def build(
        self, source: Language, target: Language, text: str, options: PromptOptions = NO_OPTIONS
    ) -> Prompt:
        if options.markup and self.formatted:
            return ChatPrompt([{"role": "user", "content": self._formatted(target, text, options)}])
        if options.glossary or options.context:
            return ChatPrompt(
                [{"role": "user", "content": self._with_options(target, text, options)}]
            )
        if source.code in _CHINESE or target.code in _CHINESE:
            instruction = self.chinese.format(target=target.zh_name)
        else:
            instruction = self.english.format(target=target.name)
        return ChatPrompt([{"role": "user", "content": f"{instruction}\n\n{text}"}])

    def control_strings(self) -> tuple[str, ...]:
        """The formatted-translation template's frame: a text or glossary term holding
        ``</source>`` closed the source early, and ``<target>...</target>`` in it posed as
        the answer the template asks for."""
        return _FRAME if self.formatted else ()

    def _formatted(self, target: Language, text: str, options: PromptOptions) -> str:
        head = ""
        if options.glossary:
            lines = "\n".join(self.term.format(source=s, target=t) for s, t in options.glossary)
            head = self.terms.format(terms=lines)
        if options.context:
            head += f"{options.context}\n\n"
        assert self.formatted is not None
        return head + self.formatted.format(target=target.zh_name, text=text)

    def markup_answer(self, output: str) -> str:
        if not self.formatted:
            return output
        return target_text(output)

    def _with_options(self, target: Language, text: str, options: PromptOptions) -> str:
        head = ""
        if options.glossary:
            lines = "\n".join(self.term.format(source=s, target=t) for s, t in options.glossary)
            head = self.terms.format(terms=lines)
        if options.context:
            return head + self.context.format(
                context=options.context, target=target.zh_name, text=text
            )
        return head + self.chinese.format(target=target.zh_name) + "\n" + text


class HunyuanMtPrompts(HyMtPrompts):
    """Hunyuan-MT-7B: its own Chinese instruction; no terminology or context templates."""

    name: ClassVar[str] = "hunyuan_mt"
    chinese = "把下面的文本翻译成{target}，不要额外解释。"
    supports: frozenset[str] = frozenset()
    formatted = None
    placeholders: ClassVar[Style] = DEFAULT_STYLE


_CHIMERA = re.compile(r"hunyuan[-_]?mt[-_]?chimera", re.IGNORECASE)


def unservable_model(model: str) -> str | None:
    """Why ``model`` cannot be served by any family, or None (see the module docstring)."""
    if _CHIMERA.search(model):
        return (
            f"engine.model {model!r} is Hunyuan-MT-Chimera, an ensemble model: it fuses "
            "several candidate translations into one and does not translate a single text. "
            "Serve tencent/Hunyuan-MT-7B (prompt.family: hunyuan_mt) or tencent/HY-MT1.5-7B "
            "(prompt.family: hy_mt) instead."
        )
    return None


def target_text(output: str) -> str:
    """The text of an answer that is ``<target>...</target>`` (the closing tag optional),
    or the answer as it is. String operations: the regex it replaces (a lazy group between
    optional spaces) was quadratic on a run of spaces, 8 s for 20,000 on the event loop."""
    text = output.strip()
    if not text.startswith("<target>"):
        return output
    return text.removeprefix("<target>").removesuffix("</target>").strip()
