"""Text → speakable pieces and prompt ids (DESIGN §2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.text import (
    TextError,
    TextOptions,
    clean_text,
    max_tokens_for,
    prompt_ids,
    speakable_pieces,
    validate_voice,
)
from plugins.orpheus.engine.tokenizer import load_encoder
from plugins.spoken_words import korean_number, normalize_en, number_words, ordinal_words


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("It costs $25.50.", "It costs twenty five dollars and fifty cents."),
        ("$3k", "three thousand dollars"),
        ("at 3:30 pm", "at three thirty p m"),
        ("at 7am", "at seven a m"),
        ("on 2024-03-05", "on March fifth, twenty twenty four"),
        ("March 3rd, 2021", "March third, twenty twenty one"),
        ("the 21st time", "the twenty first time"),
        ("5 km and 20%", "five kilometers and twenty percent"),
        ("-5 °C", "minus five degrees Celsius"),
        ("Dr. Smith", "doctor Smith"),
        ("1,234,567", "one million two hundred thirty four thousand five hundred sixty seven"),
        ("pi is 3.14", "pi is three point one four"),
        ("in 1987", "in nineteen eighty seven"),
    ],
)
def test_english_normalisation(text: str, spoken: str) -> None:
    assert normalize_en(text) == spoken


def test_number_words() -> None:
    assert number_words(0) == "zero"
    assert number_words(115) == "one hundred fifteen"
    assert number_words(2_000_001) == "two million one"
    assert ordinal_words(12) == "twelfth" and ordinal_words(40) == "fortieth"
    assert korean_number(12000) == "만 이천" and korean_number(350) == "삼백오십"
    # past 조's range (a decode's runaway digits, an account number an LLM wrote): digit by digit, no crash
    largest = "구천구백구십구조 구천구백구십구억 구천구백구십구만 구천구백구십구"
    assert korean_number(9999_9999_9999_9999) == largest
    assert korean_number(10**16 + 5) == "일" + "공" * 15 + "오"


def test_voice_validation() -> None:
    assert validate_voice("tara") == "tara"
    with pytest.raises(TextError, match="unknown voice"):
        validate_voice("darth")
    with pytest.raises(TextError, match="unsupported language"):
        validate_voice("tara", "xx")


def test_tags_kept_with_their_sentence_and_unknown_tags_dropped_or_refused() -> None:
    pieces = speakable_pieces("Well <laugh> that was fun. <sigh> Now <wink> we work.")
    assert pieces == ["Well <laugh> that was fun.", "<sigh> Now we work."]
    with pytest.raises(TextError, match="unknown tag <wink>"):
        clean_text("Now <wink> we work.", TextOptions(unknown_tags="error"))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty text"),
        ("   \n\t ", "empty text"),
        ("😀🎉", "nothing speakable"),
        ("こんにちは世界", "nothing speakable"),
        ("\x00\x07\x1b", "nothing speakable"),
        ("x" * 6000, "too long"),
    ],
)
def test_hostile_text_gives_one_line_errors(text: str, error: str) -> None:
    with pytest.raises(TextError, match=error) as info:
        speakable_pieces(text)
    assert "\n" not in str(info.value)


def test_hostile_text_that_still_has_words_is_cleaned() -> None:
    assert speakable_pieces("hi\x00 there 😀 <smile> friend") == ["hi there friend"]
    long = speakable_pieces("word " * 600)  # 3 000 characters: split into bounded pieces
    assert len(long) > 10 and all(len(p.split()) <= 40 for p in long)
    assert all(len(w) <= 40 for p in speakable_pieces("a" * 3000) for w in p.split())


def test_prompt_ids_layout_single_bos(test_model: Path) -> None:
    encode = load_encoder(test_model / "orpheus")
    p = prompt_ids("tara", "Hello there.", encode)
    assert p[:2] == [ids.START_OF_HUMAN, ids.BOS]
    assert p[-4:] == [ids.EOT, ids.END_OF_HUMAN, ids.START_OF_AI, ids.START_OF_SPEECH]
    assert p.count(ids.BOS) == 1
    assert p[2:-4] == encode("tara: Hello there.")[1:]
    # an encoder that adds no BOS (or two) still gives exactly one
    assert prompt_ids("tara", "x", lambda s: [5, 6]).count(ids.BOS) == 1
    assert prompt_ids("tara", "x", lambda s: [ids.BOS, ids.BOS, 5]).count(ids.BOS) == 1


def test_max_tokens_grows_with_text_and_is_whole_frames() -> None:
    short, longer = max_tokens_for("Hi."), max_tokens_for("word " * 20)
    assert short % 7 == 0 and longer % 7 == 0
    assert longer > short
    # 20 words at 2 words/s = 10 s, + 2 s margin → ≈ 12 s · 82 tokens/s
    assert abs(longer - 12 * ids.TOKENS_PER_SECOND) < 14
    assert max_tokens_for("Hi <laugh> there.") > max_tokens_for("Hi there.")
    assert max_tokens_for("word " * 5000) <= TextOptions().max_tokens_cap
