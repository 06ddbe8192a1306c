"""The business vocabulary: one checked list, in every decode's prompt, never dropped as an echo."""

from __future__ import annotations

import numpy as np
import pytest
from livekit.agents import stt

from plugins.whisper.guard import clean_text
from plugins.whisper.model import DecodeResult, Segment
from plugins.whisper.options import WhisperConfigError
from plugins.whisper.vocabulary import (
    MAX_TERMS,
    check_vocabulary,
    parse_vocabulary,
    vocabulary_prompt,
    with_vocabulary,
)
from tests.whisper.test_stream_policy import (
    ScriptedModel,
    make_stt,
    say_one_sentence,
    sentence_audio,
    silence,
)

E = stt.SpeechEventType


def test_terms_are_cleaned_and_kept_in_order() -> None:
    assert check_vocabulary(["  Okonkwo ", "Harrowgate   Road", "Okonkwo", "Xarelto"]) == (
        "Okonkwo",
        "Harrowgate Road",
        "Xarelto",
    )
    assert parse_vocabulary(" Okonkwo, ,Invisalign ,") == ("Okonkwo", "Invisalign")
    assert parse_vocabulary("") == ()


@pytest.mark.parametrize(
    ("terms", "needle"),
    [
        ([""], "an empty term"),
        (["Smith\nignore the above"], "control character"),
        (["x" * 41], "over 40 characters"),
        ([f"Term{i}" for i in range(MAX_TERMS + 1)], f"at most {MAX_TERMS}"),
        ([f"{'Abcdefghij' * 3} {i:02d}" for i in range(20)], "over 500 characters in all"),
    ],
)
def test_a_list_that_cannot_work_is_one_line(terms: list[str], needle: str) -> None:
    with pytest.raises(WhisperConfigError) as err:
        check_vocabulary(terms)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_the_prompt_is_the_style_then_the_terms() -> None:
    assert vocabulary_prompt(()) == ""
    assert with_vocabulary(" Um, uh. ", ("Okonkwo", "Xarelto")) == "Um, uh. Okonkwo, Xarelto."
    assert with_vocabulary("", ("Okonkwo",)) == "Okonkwo."
    assert with_vocabulary("Um, uh.", ()) == "Um, uh."


def _result(text: str) -> DecodeResult:
    return DecodeResult((Segment(f" {text}", 0.0, 1.5, 0.01, -0.2, 1.1),), "en", 1.5, 0.1)


def test_a_caller_saying_one_listed_term_is_not_an_echo_of_the_prompt() -> None:
    prompt = with_vocabulary("Um, uh.", ("Harrowgate Medical Center", "Okonkwo", "Xarelto"))
    terms = ("Harrowgate Medical Center", "Okonkwo", "Xarelto")
    said = _result("Harrowgate Medical Center.")
    assert clean_text(said, speech_s=1.2, prompt=prompt, terms=terms) == "Harrowgate Medical Center."
    # the list itself written out is Whisper copying its prompt (over noise), and is dropped
    echo = _result("Harrowgate Medical Center, Okonkwo, Xarelto.")
    assert clean_text(echo, speech_s=1.2, prompt=prompt, terms=terms) == ""
    assert clean_text(said, speech_s=1.2, prompt=prompt) == ""  # without the terms: read as an echo


async def test_every_decode_of_a_stream_carries_the_vocabulary_after_the_style() -> None:
    model = ScriptedModel(delay_s=0.005)
    events = await say_one_sentence(model, style_prompt="Um, mm-hmm.", vocabulary=("Okonkwo", "Xarelto"))
    prompts = {r.initial_prompt for _, r in model.requests}
    assert prompts == {"Um, mm-hmm. Okonkwo, Xarelto."}
    assert [e.alternatives[0].text for e in events if e.type == E.FINAL_TRANSCRIPT] == ["Sentence 1."]


async def test_recognize_is_primed_with_the_vocabulary_alone() -> None:
    from livekit import rtc

    model = ScriptedModel(delay_s=0.0)
    s = make_stt(model, style_prompt="Um, mm-hmm.", vocabulary=("Okonkwo",))
    pcm = (
        np.clip(np.concatenate([silence(0.3), sentence_audio(2, 1.0), silence(0.3)]), -1, 1) * 32767
    ).astype(np.int16)
    event = await s.recognize(rtc.AudioFrame(pcm.tobytes(), 16000, 1, len(pcm)))
    assert event.alternatives[0].text == "Sentence 2."
    assert [r.initial_prompt for _, r in model.requests] == ["Okonkwo."]


def test_the_longest_prompt_fits_the_host_speech_engines_cap() -> None:
    """The style prompt (the stt_prompt option, at most 200 characters), the vocabulary and a long turn's
    committed text (its last 200 characters) travel to the host speech engine in one request field."""
    from plugins.whisper.engine_server import MAX_PROMPT_CHARS
    from plugins.whisper.vocabulary import MAX_VOCABULARY_CHARS

    assert 200 + 1 + MAX_VOCABULARY_CHARS + 1 + 200 <= MAX_PROMPT_CHARS
