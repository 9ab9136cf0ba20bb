"""A tokenizer for a tiny config, written beside its ``config.json`` (no hub).

vLLM's pooling runners and several model classes read the tokenizer (its
special tokens, its length) while the engine starts. The zoo writes a real
fast tokenizer whose vocabulary is one word per id (``t0`` .. ``t<vocab-1>``),
as long as the largest ``vocab_size`` of the config and its sub-configs, with
ids 1 to 4 as its special tokens (bos, eos, pad, unk; id 0 is an ordinary word) and the
top ids named as multimodal placeholders (:data:`PLACEHOLDERS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PLACEHOLDERS", "top_id", "vocab_size", "write_tokenizer"]

_DEFAULT_VOCAB = 512

#: Placeholder words of multimodal checkpoints' tokenizers, given the top ids.
PLACEHOLDERS = (
    "<image>",
    "<video>",
    "<audio>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|audio_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<IMG_CONTEXT>",
    "<img>",
    "</img>",
)


def vocab_size(config: Any) -> int:
    """The largest ``vocab_size`` in ``config`` and its sub-configs (512 when none is set)."""
    best = 0
    stack = [config.to_dict() if hasattr(config, "to_dict") else dict(config)]
    while stack:
        d = stack.pop()
        value = d.get("vocab_size")
        if isinstance(value, int) and not isinstance(value, bool):
            best = max(best, value)
        stack.extend(v for v in d.values() if isinstance(v, dict))
    return best or _DEFAULT_VOCAB


def _top_words(named: Mapping[str, str], looked_up: Sequence[str] = ()) -> list[str]:
    # The top ids are the placeholder words multimodal processors look up by name (DeepSeek-VL2's
    # "<image>"), then the words the model code looks up (Entry.words): a checkpoint's
    # tokenizer has them.
    return list(dict.fromkeys([*PLACEHOLDERS, *named.values(), *looked_up]))


def top_id(word: str, size: int, named: Mapping[str, str] | None = None) -> int:
    """The id :func:`write_tokenizer` gives ``word`` in a vocabulary of ``size``.

    For a config that names its placeholder's id (``image_token_id``), which a checkpoint's
    tokenizer and config agree on.
    """
    return size - 1 - _top_words(dict(named or {})).index(word)


def write_tokenizer(
    folder: Path,
    config: Any,
    named: Mapping[str, str] | None = None,
    looked_up: Sequence[str] = (),
) -> Any:
    """Writes ``tokenizer.json`` and ``tokenizer_config.json`` for ``config``; returns it.

    ``named`` maps the tokenizer attributes a checkpoint's processor reads (``image_token``,
    ``boi_token``) to their words, which get top ids like the placeholders and are saved as
    the tokenizer's ``extra_special_tokens``; ``looked_up`` words get top ids too (the model's code
    looks them up in the vocabulary).
    """
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    size = max(vocab_size(config), 8)
    # Id 0 is an ordinary word: CLIP's processor uses it as its image placeholder and asserts
    # that it is no special token (vllm/model_executor/models/clip.py:228).
    words = {f"t{i}": i for i in range(size)}
    named = dict(named or {})
    top = _top_words(named, looked_up)
    for i, word in enumerate(top):
        if size - 1 - i > 8:
            del words[f"t{size - 1 - i}"]
            words[word] = size - 1 - i
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="t4"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    # Added tokens, as a checkpoint's tokenizer has its placeholders: matched before the
    # whitespace split, so that a processor's run of them ("<image><image>") is one id each.
    tokenizer.add_tokens([AddedToken(w, normalized=False) for w in top if w in words])
    # transformers leaves PreTrainedTokenizerFast's constructor (TokenizersBackend's) unannotated.
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        unk_token="t4",
        bos_token="t1",
        eos_token="t2",
        pad_token="t3",
        model_max_length=4096,
        **({"extra_special_tokens": named} if named else {}),
    )
    fast.save_pretrained(folder)
    return fast
