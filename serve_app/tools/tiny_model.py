"""Builds a tiny random-weight Qwen2 model on disk, for tests and the offline demo.

No download is involved: a byte-level BPE tokenizer is trained on a few lines of text and the
weights are random. The model runs through the real vLLM engine (CPU build included) but its
output is nonsense, so callers assert on structure, never on translation quality.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# A ChatML template, as Qwen2/Qwen3 ship: the generic chat prompt family renders through it.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    "Translate the following segment into German, without additional explanation.",
    "The quick brown fox jumps over the lazy dog. Hello world, how are you today?",
    "Der schnelle braune Fuchs springt über den faulen Hund. Guten Morgen!",
    "Le renard brun rapide saute par-dessus le chien paresseux. Bonjour à tous.",
    "El rápido zorro marrón salta sobre el perro perezoso. ¿Qué tal?",
    "敏捷的棕色狐狸跳过了懒狗。把下面的文本翻译成英语，不要额外解释。",
    "素早い茶色の狐が怠け者の犬を飛び越える。こんにちは世界。",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "0123456789 !?.,;:'\"()[]{}<>-_/\\@#$%^&*+=~`|",
]
_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Bumped when the model built changes: a folder built by an older version is rebuilt.
_BUILD = 2
_BUILD_STAMP = ".tiny-model-build"


def _train_tokenizer(out: Path, vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=4096,
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(out)
    return fast


def _speechless_tokens(tokenizer: Any) -> list[int]:
    """Ids of tokens that show nothing on their own: special tokens, whitespace, control
    characters and bytes of a split UTF-8 character."""
    special = set(tokenizer.all_special_ids)
    out = []
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id])
        if token_id in special or not text.strip() or "\ufffd" in text or not text.isprintable():
            out.append(token_id)
    return out


def build_tiny_model(out_dir: str | Path, vocab_size: int = 512) -> Path:
    """Writes a ~1 MB Qwen2 model (hidden 128, 2 heads of 64, 2 layers) to ``out_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    stamp = out / _BUILD_STAMP
    built = stamp.is_file() and stamp.read_text().strip() == str(_BUILD)
    if built and (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(out, vocab_size)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        # Head size 64: the CPU attention backend refuses 16.
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        # Untied: with the output layer tied to the embeddings, a random model's likeliest
        # next token is its last input token, so greedy decoding repeats the prompt's final
        # newline to the token limit (an empty translation once stripped).
        tie_word_embeddings=False,
        dtype="float32",
        eos_token_id=eos_id,
    )
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        # Logit 0 for tokens that show nothing, among random logits around 0: greedy
        # decoding picks visible (nonsense) words, as the demo promises.
        model.lm_head.weight[_speechless_tokens(tokenizer)] = 0.0
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos_id}))
    stamp.write_text(f"{_BUILD}\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", help="folder to write the model into")
    out_dir = parser.parse_args().out_dir
    from serve_app.tools.launcher import stdout_to_stderr

    with stdout_to_stderr():
        path = build_tiny_model(out_dir)
    print(path)  # only the path on stdout, for a shell to capture


if __name__ == "__main__":
    main()
