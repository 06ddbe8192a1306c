"""Batched Whisper decodes: several streams' audio through one CTranslate2 encode and one generate.

The host speech engine (engine.py) decodes every job process's requests; on a GPU one batched call costs
about what one decode does, and on a CPU it shares the encoder's matrix work. A batch holds requests that
encode the same window (`batch_key`), so each is decoded as `WhisperModelRunner.decode` would decode it
alone: same features, same silence fill of the short window, same prompt, same greedy/beam settings. The
difference is only the shared `max_length` (the batch's largest), after which each result is cut to its
own token budget. Requests batch only with requests of the same text prompt (CTranslate2 needs
<|startoftranscript|> at one position across a batch): every stream's style prompt is the same, a long turn's
committed context makes its own key. Requests with segment timestamps are decoded singly
(`WhisperModelRunner.decode`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .decoding import (
    HOP,
    PRIORITY_PARTIAL,
    SAMPLE_RATE,
    DecodeRequest,
    DecodeResult,
    Segment,
    encoder_frames,
    max_new_tokens,
)
from .weights import WhisperModelError
from .words import words_of

_FULL_FRAMES = 3000  # Whisper's 30 s window


@dataclass(frozen=True)
class BatchKey:
    """Requests that may share one encode + generate."""

    frames: int
    language: str | None
    beam_size: int
    prompt: str = ""  # the text prompt, as given: same text, same prompt tokens


def batch_key(n_samples: int, request: DecodeRequest) -> BatchKey | None:
    """The batch a request may join, or None when it must be decoded alone (segment timestamps)."""
    if request.with_timestamps:
        return None
    frames = encoder_frames(n_samples, request.window_s) or _FULL_FRAMES
    return BatchKey(frames, request.language, request.beam_size, request.initial_prompt or "")


def _features(model: object, audio: np.ndarray, frames: int) -> tuple[np.ndarray, int]:
    """Log-mel features of one request, cut to the window and filled with the features' floor after the
    audio (what `ShortWindowWhisperModel.encode` does for a single decode)."""
    from faster_whisper.audio import pad_or_trim

    feats = model.feature_extractor(audio)  # type: ignore[attr-defined]
    content = min(_FULL_FRAMES, feats.shape[-1] - 1)
    seg = np.array(pad_or_trim(feats[:, :content]), dtype=np.float32)
    if frames < _FULL_FRAMES:
        seg = np.array(seg[:, :frames], copy=True)
        used = min(len(audio) // HOP, frames)
        if 0 < used < frames:
            seg[:, used:] = seg[:, :used].min()
    return seg, content


def decode_batch(
    model: Any, model_name: str, items: Sequence[tuple[np.ndarray, DecodeRequest]]
) -> list[DecodeResult]:
    """Decode requests of one `batch_key` together with a loaded faster-whisper model (the runner's);
    results in the order given."""
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens

    if not items:
        return []
    keys = {batch_key(len(a), r) for a, r in items}
    if len(keys) != 1 or None in keys:
        raise ValueError("decode_batch takes requests of one batch key (no timestamps, one prompt)")
    key = next(iter(keys))
    assert key is not None
    language = key.language
    multilingual = bool(model.model.is_multilingual)  # type: ignore[attr-defined]
    if language is not None and not multilingual and language != "en":
        raise WhisperModelError(f"model {model_name!r} is English-only; cannot decode {language!r}")
    if language is None and not multilingual:
        language = "en"
    started = time.perf_counter()
    feats = [_features(model, a, key.frames) for a, _ in items]
    batch = np.stack([f for f, _ in feats])
    # the base class's encode: the short window is already cut (the subclass reads a per-thread setting)
    from faster_whisper import WhisperModel

    encoded = WhisperModel.encode(model, batch)
    languages: list[str] = []
    if language is None:
        detected = model.model.detect_language(encoded)  # type: ignore[attr-defined]
        languages = [d[0][0][2:-2] for d in detected]
    else:
        languages = [language] * len(items)
    tokenizers = [
        Tokenizer(model.hf_tokenizer, multilingual, task="transcribe", language=lang)  # type: ignore[attr-defined]
        for lang in languages
    ]
    # the prompt's tokens as faster-whisper's transcribe makes them for a single decode
    previous = tokenizers[0].encode(" " + key.prompt.strip()) if key.prompt else []
    prompts = [model.get_prompt(tok, previous, without_timestamps=True) for tok in tokenizers]  # type: ignore[attr-defined]
    budgets = [max_new_tokens(len(a)) for a, _ in items]
    max_length = min(
        model.max_length,  # type: ignore[attr-defined]
        max(len(p) + b for p, b in zip(prompts, budgets, strict=True)),
    )
    results = model.model.generate(  # type: ignore[attr-defined]
        encoded,
        prompts,
        beam_size=key.beam_size,
        patience=1,
        length_penalty=1,
        repetition_penalty=1,
        no_repeat_ngram_size=0,
        max_length=max_length,
        return_scores=True,
        return_no_speech_prob=True,
        suppress_blank=True,
        suppress_tokens=get_suppressed_tokens(tokenizers[0], [-1]),
        max_initial_timestamp_index=50,
        return_logits_vocab=any(r.priority != PRIORITY_PARTIAL for _, r in items),
    )
    decode_s = time.perf_counter() - started
    out: list[DecodeResult] = []
    rows = zip(items, feats, results, tokenizers, languages, budgets, strict=True)
    for (audio, request), (_, content), res, tok, lang, budget in rows:
        tokens = list(res.sequences_ids[0])[:budget]
        n = len(res.sequences_ids[0])
        avg_logprob = res.scores[0] * n / (n + 1)
        text = tok.decode(tokens)
        audio_s = len(audio) / SAMPLE_RATE
        segments: tuple[Segment, ...] = ()
        # faster-whisper's silence rule: a likely no-speech window with a poor decode yields no segment
        silent = res.no_speech_prob > 0.6 and avg_logprob <= -1.0
        if text.strip() and not silent and content > 0:
            segments = (
                Segment(
                    text=text,
                    start=0.0,
                    end=content / 100,
                    no_speech_prob=float(res.no_speech_prob),
                    avg_logprob=float(avg_logprob),
                    compression_ratio=float(get_compression_ratio(text.strip())),
                ),
            )
        scored = segments and request.priority != PRIORITY_PARTIAL  # what model.py's decode gives
        words = words_of(res, model.hf_tokenizer, budget) if scored else ()  # type: ignore[attr-defined]
        out.append(DecodeResult(segments, lang, audio_s, decode_s, words=words))
    return out
