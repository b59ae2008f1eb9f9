"""Each prompt family against its authors' documentation, byte for byte.

The expected strings are copied from the model cards / repository READMEs named in each
family's module docstring; a change to a family's prompt must show up here.
"""

from __future__ import annotations

import pytest

from serve_app.core.config import PromptConfig, SamplingConfig
from serve_app.translation.families import (
    FAMILIES,
    ChatPrompt,
    PromptOptions,
    RawPrompt,
    effective_sampling,
    make_prompt_family,
)
from serve_app.translation.languages import ALL_LANGUAGES

EN, DE, ZH, JA, CS = (ALL_LANGUAGES[c] for c in ("en", "de", "zh", "ja", "cs"))


def family(name: str):  # type: ignore[no-untyped-def]
    return make_prompt_family(PromptConfig(family=name))


def user_content(prompt: object) -> str:
    assert isinstance(prompt, ChatPrompt)
    [turn] = prompt.messages  # one user turn, no system prompt
    assert turn["role"] == "user"
    content = turn["content"]
    assert isinstance(content, str)
    return content


# -- HY-MT1.5 (Tencent-Hunyuan/HY-MT README) --------------------------------------------------


def test_hy_mt_xx_template_is_the_cards() -> None:
    prompt = family("hy_mt").build(EN, DE, "It’s on the house.")
    assert user_content(prompt) == (
        "Translate the following segment into German, without additional explanation."
        "\n\nIt’s on the house."
    )


@pytest.mark.parametrize(("src", "tgt", "name"), [(EN, ZH, "中文"), (ZH, JA, "日语")])
def test_hy_mt_zh_template_is_the_cards_when_chinese_is_involved(src, tgt, name) -> None:
    prompt = family("hy_mt").build(src, tgt, "It’s on the house.")
    assert user_content(prompt) == (
        f"将以下文本翻译为{name}，注意只需要输出翻译后的结果，不要额外解释：\n\nIt’s on the house."
    )


def test_hy_mt_terminology_template_is_the_cards() -> None:
    options = PromptOptions(glossary=(("house", "Haus"),))
    prompt = family("hy_mt").build(EN, DE, "It’s on the house.", options)
    assert user_content(prompt) == (
        "参考下面的翻译：\nhouse 翻译成 Haus\n\n"
        "将以下文本翻译为德语，注意只需要输出翻译后的结果，不要额外解释：\nIt’s on the house."
    )


def test_hy_mt_context_template_is_the_cards_with_its_final_newline() -> None:
    options = PromptOptions(context="At the bar.")
    prompt = family("hy_mt").build(EN, DE, "It’s on the house.", options)
    assert user_content(prompt) == (
        "At the bar.\n参考上面的信息，把下面的文本翻译成德语，注意不需要翻译上文，也不要额外解释："
        "\nIt’s on the house.\n"
    )


# The card's table of supported languages: code, English name, Chinese name.
HY_MT_CARD_LANGUAGES = """zh Chinese 中文|en English 英语|fr French 法语|pt Portuguese 葡萄牙语|
es Spanish 西班牙语|ja Japanese 日语|tr Turkish 土耳其语|ru Russian 俄语|ar Arabic 阿拉伯语|
ko Korean 韩语|th Thai 泰语|it Italian 意大利语|de German 德语|vi Vietnamese 越南语|
ms Malay 马来语|id Indonesian 印尼语|tl Filipino 菲律宾语|hi Hindi 印地语|
zh-Hant Traditional_Chinese 繁体中文|pl Polish 波兰语|cs Czech 捷克语|nl Dutch 荷兰语|
km Khmer 高棉语|my Burmese 缅甸语|fa Persian 波斯语|gu Gujarati 古吉拉特语|ur Urdu 乌尔都语|
te Telugu 泰卢固语|mr Marathi 马拉地语|he Hebrew 希伯来语|bn Bengali 孟加拉语|ta Tamil 泰米尔语|
uk Ukrainian 乌克兰语|bo Tibetan 藏语|kk Kazakh 哈萨克语|mn Mongolian 蒙古语|ug Uyghur 维吾尔语|
yue Cantonese 粤语"""


def test_hy_mt_languages_and_their_names_are_the_cards() -> None:
    rows = [r.split() for r in HY_MT_CARD_LANGUAGES.replace("\n", "").split("|")]
    card = {code: (en.replace("_", " "), zh) for code, en, zh in rows}
    for name in ("hy_mt", "hunyuan_mt"):
        assert set(family(name).languages) == set(card)
    assert {c: (ALL_LANGUAGES[c].name, ALL_LANGUAGES[c].zh_name) for c in card} == card


def test_hy_mt_decodes_as_the_cards_recommend() -> None:
    assert effective_sampling(family("hy_mt"), SamplingConfig()) == SamplingConfig(
        temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05
    )


# -- Hunyuan-MT-7B (Tencent-Hunyuan/Hunyuan-MT README) ----------------------------------------


def test_hunyuan_mt_templates_are_the_cards() -> None:
    zh = family("hunyuan_mt").build(EN, ZH, "It’s on the house.")
    assert user_content(zh) == "把下面的文本翻译成中文，不要额外解释。\n\nIt’s on the house."
    xx = family("hunyuan_mt").build(EN, DE, "It’s on the house.")
    assert user_content(xx) == (
        "Translate the following segment into German, without additional explanation."
        "\n\nIt’s on the house."
    )
    assert family("hunyuan_mt").supports == frozenset()  # the card documents no options


# -- Seed-X (ByteDance-Seed/Seed-X-7B README) ---------------------------------------------------


def test_seed_x_prompt_is_the_readmes_example() -> None:
    prompt = family("seed_x").build(EN, ZH, "May the force be with you")
    assert prompt == RawPrompt(
        "Translate the following English sentence into Chinese:\nMay the force be with you <zh>"
    )
    assert prompt.add_special_tokens  # no chat template: the tokenizer adds <s>


def test_seed_x_stops_at_its_chain_of_thought() -> None:
    seed_x = family("seed_x")
    assert seed_x.stop_sequences("May the force be with you") == ("[COT]",)
    # A text that itself holds the marker keeps it in its translation.
    assert seed_x.stop_sequences("The [COT] marker") == ()
    assert family("hy_mt").stop_sequences("anything") == ()


def test_seed_x_decodes_greedily_as_the_readme_does() -> None:
    assert effective_sampling(family("seed_x"), SamplingConfig()).temperature == 0.0


# -- TranslateGemma (google/translategemma-* model card) ----------------------------------------


def test_translategemma_sends_the_cards_structured_content() -> None:
    prompt = family("translategemma").build(CS, DE, "V nejhorším případě i k prasknutí čočky.")
    assert prompt == ChatPrompt(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "source_lang_code": "cs",
                        "target_lang_code": "de",
                        "text": "V nejhorším případě i k prasknutí čočky.",
                    }
                ],
            }
        ]
    )


@pytest.mark.parametrize(("code", "sent"), [("zh-Hant", "zh-TW"), ("pt", "pt-PT"), ("tl", "tl")])
def test_translategemma_codes_tell_the_wmt24pp_variants_apart(code: str, sent: str) -> None:
    prompt = family("translategemma").build(EN, ALL_LANGUAGES[code], "Hi")
    assert isinstance(prompt, ChatPrompt)
    assert prompt.messages[0]["content"][0]["target_lang_code"] == sent


# The WMT24++ locales the card evaluates (55, from English).
WMT24PP = (
    "ar_EG", "ar_SA", "bg_BG", "bn_IN", "ca_ES", "cs_CZ", "da_DK", "de_DE", "el_GR", "es_MX",
    "et_EE", "fa_IR", "fi_FI", "fil_PH", "fr_CA", "fr_FR", "gu_IN", "he_IL", "hi_IN", "hr_HR",
    "hu_HU", "id_ID", "is_IS", "it_IT", "ja_JP", "kn_IN", "ko_KR", "lt_LT", "lv_LV", "ml_IN",
    "mr_IN", "nl_NL", "no_NO", "pa_IN", "pl_PL", "pt_BR", "pt_PT", "ro_RO", "ru_RU", "sk_SK",
    "sl_SI", "sr_RS", "sv_SE", "sw_KE", "sw_TZ", "ta_IN", "te_IN", "th_TH", "tr_TR", "uk_UA",
    "ur_PK", "vi_VN", "zh_CN", "zh_TW", "zu_ZA",
)  # fmt: skip
OUR_CODE = {"fil_PH": "tl", "pt_BR": "pt-BR", "zh_TW": "zh-Hant"}


def test_translategemma_languages_are_the_cards() -> None:
    assert len(WMT24PP) == 55
    card = {"en"} | {OUR_CODE.get(loc, loc.split("_")[0]) for loc in WMT24PP}
    assert set(family("translategemma").languages) == card
    assert card <= set(ALL_LANGUAGES)


# -- chat (Qwen3's card) ------------------------------------------------------------------------


def test_chat_family_decodes_as_qwen3s_card_asks_not_greedily() -> None:
    sampling = effective_sampling(family("chat"), SamplingConfig())
    assert sampling == SamplingConfig(
        temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, presence_penalty=0.0
    )
    configured = SamplingConfig(temperature=0.0, min_p=0.05, presence_penalty=1.5)
    assert effective_sampling(family("chat"), configured) == SamplingConfig(
        temperature=0.0, top_p=0.8, top_k=20, min_p=0.05, presence_penalty=1.5
    )


def test_chat_family_passes_system_prompt_and_template_kwargs() -> None:
    config = PromptConfig(family="chat", system_prompt="Be exact.")
    prompt = make_prompt_family(config).build(DE, EN, "Hallo")
    assert isinstance(prompt, ChatPrompt)
    assert prompt.messages[0] == {"role": "system", "content": "Be exact."}
    assert prompt.messages[1]["content"].startswith("Translate the following text from German")
    assert prompt.messages[1]["content"].endswith("\n\nHallo")
    assert prompt.template_kwargs == {"enable_thinking": False}


# -- all families ------------------------------------------------------------------------------


def test_each_family_knows_its_languages() -> None:
    for name in FAMILIES:
        langs = family(name).languages
        assert {"en", "zh", "de"} <= set(langs)
        assert set(langs) <= set(ALL_LANGUAGES)
    assert "yue" in family("hy_mt").languages
    assert "yue" not in family("seed_x").languages


def test_effective_sampling_lays_config_over_family_defaults() -> None:
    merged = effective_sampling(family("hy_mt"), SamplingConfig(temperature=0.0))
    assert merged == SamplingConfig(temperature=0.0, top_p=0.6, top_k=20, repetition_penalty=1.05)
