"""The words of a decode and their probabilities (plugins/whisper/words.py), on token strings; real decodes
are checked in test_engine.py (single, batched and over the engine's wire)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plugins.whisper.agreement import words_kept
from plugins.whisper.engine_client import _words
from plugins.whisper.words import (
    TAIL_TOKENS,
    Word,
    chosen_probabilities,
    group_words,
    words_of,
)

PIECES = {1: "ĠCould", 2: "Ġyou", 3: "Ġput", 4: "Ġthr", 5: "ough", 6: ",", 7: "Ġtoo", 8: "."}


def _group(ids: list[int], probabilities: list[float]) -> tuple[Word, ...]:
    return group_words(
        ids, probabilities, PIECES.__getitem__, lambda g: "".join(PIECES[t] for t in g).replace("Ġ", " ")
    )


def test_tokens_join_into_words_and_punctuation_keeps_the_words_own_probability() -> None:
    words = _group([1, 2, 3, 4, 5, 6, 7, 8], [0.9, 1.0, 0.8, 0.6, 0.4, 0.99, 0.2, 0.97])
    assert [w.text for w in words] == ["Could", "you", "put", "through,", "too."]
    assert words[3].probability == pytest.approx(0.5)  # mean of "thr" and "ough"; the comma not counted
    assert words[-1].probability == pytest.approx(0.2)  # the "." Whisper is sure of does not lift it


def test_a_lone_punctuation_token_is_not_a_word() -> None:
    assert _group([8], [0.99]) == ()
    assert [w.text for w in _group([8, 1], [0.99, 0.5])] == ["Could"]


def test_chosen_probabilities_normalise_each_step() -> None:
    logits = [np.log(np.array([0.7, 0.2, 0.1])), np.array([2.0, 0.0, 0.0])]  # log-probs, then raw logits
    got = chosen_probabilities([0, 0], logits)
    assert got[0] == pytest.approx(0.7, abs=1e-6)
    assert got[1] == pytest.approx(math.exp(2) / (math.exp(2) + 2), abs=1e-6)


def test_malformed_words_from_the_engine_are_dropped_not_fatal() -> None:
    assert _words([["to", 0.4], ["her", 2.0]]) == (Word("to", 0.4), Word("her", 1.0))
    assert _words("garbage") == () and _words([["x"]]) == () and _words(None) == ()


class _Tokenizer:
    """faster-whisper's hf_tokenizer surface that words_of uses, over PIECES (ids 1-8) and <|endoftext|>."""

    def token_to_id(self, token: str) -> int | None:
        return 50 if token == "<|endoftext|>" else None

    def id_to_token(self, tid: int) -> str | None:
        return PIECES.get(tid)

    def decode(self, ids: list[int]) -> str:
        return "".join(PIECES[t] for t in ids).replace("Ġ", " ")


def _result(ids: list[int], probabilities: list[float]) -> object:
    steps = []
    for tid, p in zip(ids, probabilities, strict=True):
        v = np.full(60, np.log((1 - p) / 59))
        v[tid] = np.log(p)
        steps.append(v)
    return type("Generation", (), {"sequences_ids": [ids], "logits": [steps]})()


def test_only_the_tail_of_a_long_decode_is_read_from_a_whole_word() -> None:
    ids = [1, 2, 3] * 10 + [4, 5, 6, 7, 8]  # 35 tokens, of which the last TAIL_TOKENS are read
    words = words_of(_result(ids, [0.9] * 30 + [0.6, 0.4, 0.99, 0.2, 0.97]), _Tokenizer())
    assert words[-2:] == (Word("through,", pytest.approx(0.5)), Word("too.", pytest.approx(0.2)))
    assert len(words) <= TAIL_TOKENS < len(ids) and words[0].text in {"Could", "you", "put"}


def test_a_result_without_log_probs_or_with_a_bad_shape_gives_no_words() -> None:
    assert words_of(type("G", (), {"sequences_ids": [[1, 2]], "logits": []})(), _Tokenizer()) == ()
    assert words_of(type("G", (), {"sequences_ids": [[1, 2]], "logits": [["x", "y"]]})(), _Tokenizer()) == ()


def test_text_that_holds_the_whole_decode_ends_with_its_scored_words() -> None:
    words = (Word("put", 0.9), Word("me", 0.8), Word("through.", 0.3))
    assert words_kept("Could you put me through.", "Could you put me through.", words) == words
    # committed sentences in front of the decode have no scores; the decode's own words still end the text
    assert words_kept("Hi there. Put me through.", "Put me through.", words[1:]) == words[1:]


def test_a_loop_kept_once_is_scored_where_it_first_occurs() -> None:
    """Whisper grows surer with each repeat it copies; the first reading is the one that measures the
    audio (a hum decoded "Mama." ten times: 0.49 the first time, 0.98 later)."""
    loop = (Word("Mama.", 0.49), Word("Mama.", 0.86), Word("Mama.", 0.97), Word("Mama", 0.98))
    assert words_kept("Mama.", "Mama. Mama. Mama. Mama", loop) == (Word("Mama.", 0.49),)
    wait = (Word("Wait,", 0.7), Word("wait.", 0.8), Word("Wait,", 0.95), Word("wait.", 0.97))
    assert words_kept("Wait, wait.", "Wait, wait. Wait, wait.", wait) == wait[:2]


def test_kept_words_that_are_not_among_the_scored_ones_have_no_scores() -> None:
    """The scored tail of a long loop may not reach its first reading: no score beats a copied one."""
    tail = (Word("again.", 0.97), Word("Go", 0.98), Word("again.", 0.99))
    assert words_kept("Go home.", "Go home. Go again. Go again. Go again.", tail) == ()
    assert words_kept("", "Mama.", (Word("Mama.", 0.5),)) == ()
