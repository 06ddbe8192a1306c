"""The words of a decode and the recogniser's probability for each, from the generation's own log-probs.

Why: when a caller stops mid-clause ("put me through to | someone"), Whisper often finishes the fragment
with a word it did not hear ("through, too."), and the transcript then reads like a finished sentence. The
invented word usually gets a low probability: on the turn corpus's dev split the last word's probability
separated cut-short clauses from finished turns better than the decode's mean token probability (AUC 0.68
vs 0.59). The endpoint policy reads it (turn_detection/endpoint_policy.py).

A word is what faster-whisper's word timestamps call one: the tokens from one that starts with a space up to
the next; punctuation tokens join the word before them but not its probability (Whisper is sure of a "."
after a word it invented). The probability is the mean over the word's tokens. CTranslate2 returns each
step's log-probs when asked (`return_logits_vocab`), at no measurable cost on tiny.en (the vectors exist
anyway), so no second pass is needed. Only a decode's last `TAIL_TOKENS` tokens are read (the last words are
what the turn detector needs; reading every step of a long decode would cost a vocabulary-wide vector per
token), and only for finals and pause decodes, never partials. No livekit import.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_SPACE = "Ġ"  # byte-level BPE's mark for a leading space
TAIL_TOKENS = 16
"""Generated tokens read from the end of a decode: the last few words, whatever the decode's length."""

logger = logging.getLogger("parley.stt")


@dataclass(frozen=True)
class Word:
    text: str
    probability: float
    """Mean probability of the word's tokens (punctuation excluded), in [0, 1]."""


def _is_punctuation(piece: str) -> bool:
    piece = piece.replace(_SPACE, "")
    return bool(piece) and all(unicodedata.category(c).startswith("P") for c in piece)


def group_words(
    ids: Sequence[int],
    probabilities: Sequence[float],
    piece: Callable[[int], str],
    decode: Callable[[list[int]], str],
) -> tuple[Word, ...]:
    """Split generated token ids into words with their probabilities.

    `piece` gives a token's raw byte-level string (to see the leading-space mark and punctuation); `decode`
    turns a word's ids into text (multi-byte characters span tokens)."""
    groups: list[tuple[list[int], list[float]]] = []
    for tid, p in zip(ids, probabilities, strict=True):
        raw = piece(tid)
        if _is_punctuation(raw) and groups and not raw.startswith(_SPACE):
            groups[-1][0].append(tid)  # "to" + "." : same word, probability of the word alone
            continue
        if raw.startswith(_SPACE) or not groups:
            groups.append(([tid], [] if _is_punctuation(raw) else [p]))
        else:
            groups[-1][0].append(tid)
            groups[-1][1].append(p)
    words = []
    for group_ids, ps in groups:
        text = decode(group_ids).strip()
        if text and ps:
            words.append(Word(text, float(np.mean(ps))))
    return tuple(words)


def _host_array(step: Any) -> np.ndarray:
    """One step's vector as float32 on the host (a CUDA StorageView is copied over first)."""
    if str(getattr(step, "device", "cpu")) != "cpu" and hasattr(step, "to_device"):
        import ctranslate2

        step = step.to_device(ctranslate2.Device.cpu)
    return np.asarray(step).astype(np.float32, copy=False).ravel()


def chosen_probabilities(ids: Sequence[int], steps: Sequence[Any]) -> list[float]:
    """The probability of each generated token, from the per-step vocabulary log-probs CTranslate2 returns
    with `return_logits_vocab` (normalised here, so raw logits would give the same answer)."""
    out: list[float] = []
    for tid, step in zip(ids, steps, strict=False):
        v = _host_array(step)
        top = float(v.max())
        log_z = top + float(np.log(np.sum(np.exp(v - top))))
        out.append(float(np.exp(v[tid] - log_z)))
    return out


def words_of(result: Any, tokenizer: Any, limit: int | None = None) -> tuple[Word, ...]:
    """The last words of one CTranslate2 Whisper generation result (first hypothesis) with their
    probabilities; () when it carries no log-probs or they cannot be read (the words only refine the
    end-of-turn decision: they never cost the transcript). `tokenizer` is faster-whisper's `hf_tokenizer`."""
    try:
        return _tail_words(result, tokenizer, limit)
    except Exception as e:  # an unexpected CTranslate2 result shape: no words, the text stands
        logger.debug("word probabilities unavailable", extra={"error": str(e)[:200]})
        return ()


def _tail_words(result: Any, tokenizer: Any, limit: int | None) -> tuple[Word, ...]:
    steps = getattr(result, "logits", None)
    if not steps or not steps[0]:
        return ()
    generated = [int(t) for t in result.sequences_ids[0][:limit]]
    n = min(len(generated), len(steps[0]))
    # from the last TAIL_TOKENS, start at a word's first token so the first word read is whole
    start = max(0, n - TAIL_TOKENS)
    while start > 0 and not (tokenizer.id_to_token(generated[start]) or "").startswith(_SPACE):
        start -= 1
    generated = generated[start:n]
    probabilities = chosen_probabilities(generated, steps[0][start:n])
    eot = tokenizer.token_to_id("<|endoftext|>")
    # timestamps and other special tokens (ids from <|endoftext|> on) are not words
    kept = [(t, p) for t, p in zip(generated, probabilities, strict=False) if eot is None or t < eot]
    return group_words(
        [t for t, _ in kept],
        [p for _, p in kept],
        lambda t: tokenizer.id_to_token(t) or "",
        lambda g: tokenizer.decode(g),
    )
