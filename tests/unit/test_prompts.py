from __future__ import annotations

import pytest

from serve_app.config import PromptConfig, SamplingConfig
from serve_app.languages import ALL_LANGUAGES
from serve_app.prompts import (
    ChatPrompt,
    RawPrompt,
    effective_sampling,
    make_prompt_family,
)

EN, DE, ZH, JA = (ALL_LANGUAGES[c] for c in ("en", "de", "zh", "ja"))


def test_hy_mt_uses_model_card_english_prompt_for_non_chinese_pairs() -> None:
    prompt = make_prompt_family(PromptConfig(family="hy_mt")).build(EN, DE, "Hello")
    assert isinstance(prompt, ChatPrompt)
    assert prompt.messages == [
        {
            "role": "user",
            "content": "Translate the following segment into German, without additional "
            "explanation.\n\nHello",
        }
    ]


@pytest.mark.parametrize(("src", "tgt", "name"), [(EN, ZH, "中文"), (ZH, JA, "日语")])
def test_hy_mt_uses_chinese_prompt_when_chinese_is_involved(src, tgt, name) -> None:
    prompt = make_prompt_family(PromptConfig(family="hy_mt")).build(src, tgt, "X")
    assert isinstance(prompt, ChatPrompt)
    content = prompt.messages[0]["content"]
    assert content.startswith(f"将以下文本翻译为{name}，")
    assert content.endswith("\n\nX")


def test_hunyuan_mt_chinese_variant() -> None:
    prompt = make_prompt_family(PromptConfig(family="hunyuan_mt")).build(EN, ZH, "Hi")
    assert isinstance(prompt, ChatPrompt)
    assert prompt.messages[0]["content"] == "把下面的文本翻译成中文，不要额外解释。\n\nHi"


def test_seed_x_raw_prompt_ends_with_target_tag() -> None:
    prompt = make_prompt_family(PromptConfig(family="seed_x")).build(EN, ZH, "May the force")
    assert prompt == RawPrompt(
        "Translate the following English sentence into Chinese:\nMay the force <zh>"
    )


def test_translategemma_wraps_card_prompt_in_gemma_turns() -> None:
    prompt = make_prompt_family(PromptConfig(family="translategemma")).build(EN, DE, "Hi")
    assert isinstance(prompt, RawPrompt)
    assert prompt.text.startswith(
        "<start_of_turn>user\nYou are a professional English (en) to German (de) translator."
    )
    assert prompt.text.endswith("into German:\n\n\nHi<end_of_turn>\n<start_of_turn>model\n")


def test_chat_family_passes_system_prompt_and_template_kwargs() -> None:
    config = PromptConfig(family="chat", system_prompt="Be exact.")
    prompt = make_prompt_family(config).build(DE, EN, "Hallo")
    assert isinstance(prompt, ChatPrompt)
    assert prompt.messages[0] == {"role": "system", "content": "Be exact."}
    assert prompt.messages[1]["content"].startswith("Translate the following text from German")
    assert prompt.messages[1]["content"].endswith("\n\nHallo")
    assert prompt.template_kwargs == {"enable_thinking": False}


def test_each_family_knows_its_languages() -> None:
    for family in ("hy_mt", "hunyuan_mt", "seed_x", "translategemma", "chat"):
        langs = make_prompt_family(PromptConfig(family=family)).languages
        assert {"en", "zh", "de"} <= set(langs)
        assert set(langs) <= set(ALL_LANGUAGES)
    assert "yue" in make_prompt_family(PromptConfig(family="hy_mt")).languages
    assert "yue" not in make_prompt_family(PromptConfig(family="seed_x")).languages


def test_effective_sampling_lays_config_over_family_defaults() -> None:
    family = make_prompt_family(PromptConfig(family="hy_mt"))
    merged = effective_sampling(family, SamplingConfig(temperature=0.0))
    assert merged == SamplingConfig(temperature=0.0, top_p=0.6, top_k=20, repetition_penalty=1.05)
