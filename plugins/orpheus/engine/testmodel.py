"""A tiny random-weight Orpheus (Llama with the Orpheus vocabulary layout) + tokenizer + random SNAC.

Written in the same file layout the real loaders read: `DIR/orpheus/` is a transformers checkpoint
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json) and `DIR/snac/` holds SNAC's
config.json + pytorch_model.bin. The tokenizer is built offline with the tokenizers library: byte-level
pieces, fillers up to 128 000, Llama-3 specials at their real ids, `<custom_token_N>` at 128 256 + N.
Nothing is downloaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.snac_decoder import SNAC_24KHZ_CONFIG


@dataclass(frozen=True)
class TestModelOptions:
    hidden_size: int = 32
    layers: int = 2
    heads: int = 2
    kv_heads: int = 1
    max_positions: int = 4096
    snac_decoder_dim: int = 64  # the real model has 1024; rates and receptive field are the real ones
    snac_encoder_dim: int = 16
    snac_noise: bool = False  # noise blocks make output random; off so decodes can be compared
    seed: int = 0


_SPECIALS = {
    128000: "<|begin_of_text|>",
    128001: "<|end_of_text|>",
    128006: "<|start_header_id|>",
    128007: "<|end_header_id|>",
    128009: "<|eot_id|>",
}


def build_tokenizer():  # type: ignore[no-untyped-def]
    """A byte-level `tokenizers.Tokenizer` with Orpheus's id layout (156 940 entries)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab: dict[str, int] = {ch: i for i, ch in enumerate(sorted(alphabet))}
    for i in range(len(vocab), ids.BOS):
        vocab[f"<|filler_{i}|>"] = i
    for i in range(ids.BOS, ids.CUSTOM_BASE):
        vocab[_SPECIALS.get(i, f"<|reserved_special_token_{i - ids.BOS}|>")] = i
    for i in range(ids.CUSTOM_BASE, ids.VOCAB_SIZE):
        vocab[f"<custom_token_{i - ids.CUSTOM_BASE}>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(_SPECIALS.values()))
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", ids.BOS)]
    )
    return tok


def save_tokenizer(directory: Path) -> None:
    """tokenizer.json + tokenizer_config.json, readable by tokenizers and by transformers' AutoTokenizer."""
    build_tokenizer().save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "pad_token": "<|end_of_text|>",
        "model_max_length": 131072,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


def make_test_model(out_dir: str | Path, options: TestModelOptions = TestModelOptions()) -> Path:
    """Write the tiny model to `out_dir`; returns the dir. Takes a few seconds on one core."""
    import torch
    from snac import SNAC
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    llm_dir, snac_dir = out / "orpheus", out / "snac"
    llm_dir.mkdir(parents=True, exist_ok=True)
    snac_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(options.seed)
    config = LlamaConfig(
        vocab_size=ids.VOCAB_SIZE,
        hidden_size=options.hidden_size,
        intermediate_size=options.hidden_size * 2,
        num_hidden_layers=options.layers,
        num_attention_heads=options.heads,
        num_key_value_heads=options.kv_heads,
        max_position_embeddings=options.max_positions,
        tie_word_embeddings=True,
        bos_token_id=ids.BOS,
        eos_token_id=ids.END_OF_SPEECH,
        pad_token_id=ids.PAD,
    )
    LlamaForCausalLM(config).save_pretrained(llm_dir)
    save_tokenizer(llm_dir)

    snac_config = dict(SNAC_24KHZ_CONFIG)
    snac_config.update(
        decoder_dim=options.snac_decoder_dim, encoder_dim=options.snac_encoder_dim, noise=options.snac_noise
    )
    snac = SNAC(**snac_config)
    (snac_dir / "config.json").write_text(json.dumps(snac_config, indent=2))
    torch.save(snac.state_dict(), snac_dir / "pytorch_model.bin")
    return out
