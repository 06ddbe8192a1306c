"""Hallucination guard decisions on scripted decode results."""

from __future__ import annotations

import pytest

from plugins.whisper.guard import clean_text, cut_loop, drop_repeated_sentences, phrase_key
from plugins.whisper.model import DecodeResult, Segment


def result(*segs: tuple[str, float, float, float]) -> DecodeResult:
    return DecodeResult(
        segments=tuple(Segment(t, 0.0, 1.0, nsp, lp, cr) for t, nsp, lp, cr in segs),
        language="en",
        audio_s=2.0,
        decode_s=0.1,
    )


def test_clean_speech_passes() -> None:
    r = result((" Can you help me reset the password?", 0.02, -0.2, 1.1))
    assert clean_text(r, speech_s=2.0) == "Can you help me reset the password?"


def test_phantom_phrases_are_dropped_whatever_the_confidence() -> None:
    for text in (" Thanks for watching!", " Please subscribe.", " [MUSIC]", " ♪♪", " (applause)"):
        assert clean_text(result((text, 0.01, -0.1, 1.0)), speech_s=3.0) == "", text


def test_weak_phrases_need_evidence() -> None:
    confident = result((" Thank you.", 0.05, -0.2, 1.0))
    assert clean_text(confident, speech_s=0.8) == "Thank you."
    assert clean_text(confident, speech_s=0.2) == ""  # too little speech behind it
    unsure = result((" Thank you.", 0.3, -0.9, 1.0))
    assert clean_text(unsure, speech_s=0.8) == ""


def test_no_speech_probability() -> None:
    assert clean_text(result((" Okay then.", 0.95, -0.1, 1.0)), speech_s=1.0) == ""
    assert clean_text(result((" Okay then.", 0.7, -1.0, 1.0)), speech_s=1.0) == ""
    assert clean_text(result((" Okay then.", 0.7, -0.2, 1.0)), speech_s=1.0) == "Okay then."


def test_low_logprob_is_dropped() -> None:
    assert clean_text(result((" mumble", 0.1, -2.0, 1.0)), speech_s=2.0) == ""


def test_a_segment_over_the_compression_ratio_keeps_its_stretch_once_only_when_a_person_said_it() -> None:
    loop = " Hold on." * 20
    assert clean_text(result((loop, 0.05, -0.1, 9.0)), speech_s=1.0) == "Hold on."
    assert clean_text(result((loop, 0.55, -0.1, 9.0)), speech_s=1.0) == ""  # Whisper doubts it was speech
    assert clean_text(result((loop, 0.05, -0.1, 9.0)), speech_s=0.2) == ""  # a blip of "speech"
    assert clean_text(result((loop, 0.05, -0.1, 9.0)), speech_s=6.0) == ""  # far more speech than the stretch
    # a longer stretch looped is a clause Whisper finished on its own: dropped, not kept as a finished turn
    assert clean_text(result((" I'd like." * 20, 0.05, -0.1, 9.0)), speech_s=2.0) == ""
    library = " What about the main library?" * 3 + " What about the main"
    assert clean_text(result((library, 0.05, -0.14, 2.85)), speech_s=1.3) == ""
    # a segment over the ratio that is not one stretch repeated is still dropped, whatever the evidence
    mixed = " I need to book for 4-4-4-4-4-4-4-4-4-4-4-4-4-4"
    assert clean_text(result((mixed, 0.05, -0.1, 3.0)), speech_s=2.0) == ""
    two = result((" Move my appointment.", 0.02, -0.2, 1.0), (" Thank you." * 12, 0.02, -0.2, 6.0))
    # the utterance's speech is more than "thank you" said four times fills (3.2 s): the old rule, dropped
    assert clean_text(two, speech_s=4.0) == "Move my appointment."


def test_only_bad_segments_are_removed() -> None:
    r = result((" Move my appointment.", 0.02, -0.2, 1.0), (" Thanks for watching.", 0.95, -0.3, 1.0))
    assert clean_text(r, speech_s=2.0) == "Move my appointment."


def test_annotations_are_stripped_inside_text() -> None:
    r = result((" [laughs] Yes, that works (coughs) for me.", 0.02, -0.2, 1.0))
    assert clean_text(r, speech_s=2.0) == "Yes, that works for me."


def test_phrase_key() -> None:
    assert phrase_key(" Thanks for watching!") == "thanks for watching"
    assert phrase_key("Don't forget") == "dont forget"


def test_phrase_key_keeps_every_script() -> None:
    assert phrase_key("네, 맞아요!") == "네 맞아요"
    assert phrase_key("Café — OK?") == "café ok"
    assert phrase_key("…!?") == ""


def korean(*segs: tuple[str, float, float, float]) -> DecodeResult:
    return DecodeResult(
        segments=tuple(Segment(t, 0.0, 1.0, nsp, lp, cr) for t, nsp, lp, cr in segs),
        language="ko",
        audio_s=2.0,
        decode_s=0.1,
    )


def test_korean_transcripts_survive_the_guard() -> None:
    for text in (" 예약을 내일로 바꾸고 싶어요.", " 전화번호가 어떻게 되세요?", " 네, 맞아요."):
        assert clean_text(korean((text, 0.02, -0.3, 1.2)), speech_s=1.5) == text.strip(), text


def test_korean_phantoms_and_weak_phrases() -> None:
    assert clean_text(korean((" 시청해주셔서 감사합니다.", 0.01, -0.1, 1.0)), speech_s=3.0) == ""
    assert clean_text(korean((" 구독과 좋아요 부탁드립니다!", 0.01, -0.1, 1.0)), speech_s=3.0) == ""
    # a real "thank you" needs audio behind it, like its English counterpart
    assert clean_text(korean((" 감사합니다.", 0.05, -0.2, 1.0)), speech_s=0.8) == "감사합니다."
    assert clean_text(korean((" 감사합니다.", 0.05, -0.2, 1.0)), speech_s=0.1) == ""
    # English inventions are dropped from a Korean decode too
    assert clean_text(korean((" Thanks for watching!", 0.01, -0.1, 1.0)), speech_s=3.0) == ""


def test_a_decode_that_only_repeats_its_prompt_is_dropped() -> None:
    prompt = "I'm calling for my mother. She can't hear very well."
    assert (
        clean_text(result((" She can't hear very well.", 0.02, -0.2, 1.1)), speech_s=1.0, prompt=prompt) == ""
    )
    # new words, or a short word the prompt happens to hold, are speech
    assert (
        clean_text(result((" She is ninety.", 0.02, -0.2, 1.1)), speech_s=1.0, prompt=prompt)
        == "She is ninety."
    )
    assert clean_text(result((" Very well.", 0.02, -0.2, 1.1)), speech_s=1.0, prompt=prompt) == "Very well."
    assert (
        clean_text(result((" She can't hear very well.", 0.02, -0.2, 1.1)), speech_s=1.0)
        == "She can't hear very well."
    )


@pytest.mark.parametrize(
    "text",
    [
        "4-4-4-4-4-4-4-4-4-4",
        "그가, 그가, 그가, 그가, 그가,",
        "the the the the",
        "Thank you. Thank you. Thank you. Thank you. Thank you. Thank",
        "ㅋㅋㅋㅋㅋㅋㅋㅋ",
        "감사합니다감사합니다감사합니다",
        "谢谢谢谢谢谢",
        "예약 예약 예약 예약",
        "1, 1, 1, 1, 1, 1, 1, 1",
    ],
)
def test_repetition_loops_are_dropped_in_any_language(text: str) -> None:
    """Whisper's loops on noise ("you you you", "Thank you. Thank you. …"): without evidence that a person
    said the stretch, the whole decode goes (the compression ratio alone let these through)."""
    assert cut_loop(text) == ""
    for no_speech, speech_s in (
        (0.05, 0.2),  # the speech gate heard a blip
        (0.55, 1.0),  # Whisper rated it more likely not speech
        (0.05, 8.0),  # far more speech than the stretch said a few times: the loop hid the caller's words
    ):
        r = DecodeResult((Segment(f" {text}", 0.0, 2.0, no_speech, -0.2, 1.5),), "ko", 2.0, 0.1)
        assert clean_text(r, speech_s=speech_s) == "", (no_speech, speech_s)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Wait, wait. Wait, wait. Wait. Wait. Wait. Wait. Wait. Wait. Wait", "Wait."),
        ("Wait-wait- wait... Wait- wait", "Wait."),
        ("Sorry. Sorry. Sorry. Sorry. Sorry.", "Sorry."),
        ("No? No? No? No?", "No?"),
        ("Oh, okay. Oh, okay. Oh, okay. Oh, okay.", "Oh, okay."),
        ("잠깐만요, 잠깐만요, 잠깐만요, 잠깐만요", "잠깐만요."),
        ("감사합니다감사합니다감사합니다", "감사합니다."),
    ],
)
def test_a_loop_a_caller_was_heard_saying_is_kept_once(text: str, kept: str) -> None:
    """A caller's "Wait, wait." over the agent, decoded as a loop of "wait": the gate heard a person's worth
    of speech and Whisper took it for speech, so the word is kept once and the barge-in is not lost."""
    r = DecodeResult((Segment(f" {text}", 0.0, 1.0, 0.05, -0.45, 1.5),), "ko", 1.0, 0.1)
    assert clean_text(r, speech_s=0.7) == kept
    loud = DecodeResult((Segment(f" {text}", 0.0, 1.0, 0.05, -0.45, 3.0),), "ko", 1.0, 0.1)
    assert clean_text(loud, speech_s=0.7) == kept  # the same over the compression ratio


def test_a_kept_stretch_still_faces_the_weak_phrase_rule() -> None:
    loop = " Thank you. Thank you. Thank you. Thank you. Thank"
    assert clean_text(result((loop, 0.05, -0.3, 1.5)), speech_s=0.8) == "Thank you."
    assert clean_text(result((loop, 0.05, -0.7, 1.5)), speech_s=0.8) == ""  # not a confident decode
    assert clean_text(result((" Thanks for watching." * 4, 0.05, -0.1, 1.5)), speech_s=1.0) == ""


@pytest.mark.parametrize(
    "text",
    [
        "010-1234-5678",
        "010-1111-2222",
        "My PIN is 1, 1, 1, 1.",
        "yes yes",
        "네 네",
        "네네",
        "하하하",
        "반짝반짝",
        "100000000원입니다",
        "Mississippi",
        "No, no, no, that is not what I said.",
        "Thank you, thank you, thank you so much.",
        "Thank you. Thank you. Thank you.",
        "I said bye bye bye.",
        "My number is one one one, two two two.",
        "No no no no, wait, the other one.",
        "예약을 내일 오후 세 시로 바꾸고 싶어요.",
        "Can you help me reset the password?",
        "我想预约明天下午三点。",
    ],
)
def test_real_repeats_and_numbers_are_kept(text: str) -> None:
    assert cut_loop(text) == text


def test_a_loop_whisper_came_back_from_is_written_once() -> None:
    """From a whole member number read in groups: "447, 902, 1156"."""
    looped = " The member number is 447 " + "902 " * 11 + "9 1156."
    assert (
        clean_text(result((looped, 0.02, -0.3, 1.9)), speech_s=4.0) == "The member number is 447 902 9 1156."
    )
    for text in ("My PIN is 1, 1, 1, 1, 1, 1, 1 then.", "No no no no, wait, the other one."):
        assert clean_text(result((f" {text}", 0.02, -0.3, 1.5)), speech_s=3.0) == text  # people repeat less


def test_the_words_before_a_loop_are_kept() -> None:
    assert cut_loop("I need to book for 4-4-4-4-4-4-4-4") == "I need to book for"
    assert cut_loop("예약하고 싶은데요, 그가, 그가, 그가, 그가") == "예약하고 싶은데요"
    r = korean((" 예약하고 싶은데요 그가 그가 그가 그가 그가", 0.02, -0.3, 1.6))
    assert clean_text(r, speech_s=2.0) == "예약하고 싶은데요"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Great Thank You. Great Thank You. That is all I needed.", "Great Thank You. That is all I needed."),
        ("I'd like the window seat? i'd like the window seat!", "I'd like the window seat?"),
        ("Hello, I'd like a later booking. Hello, I'd like", "Hello, I'd like a later booking."),
        (
            "It is on Monday. It is on Monday at nine.",
            "It is on Monday. It is on Monday at nine.",
        ),  # says more
        ("No. No. I said Tuesday.", "No. No. I said Tuesday."),  # one-word sentences: insisting
        ("Thank you, thank you.", "Thank you, thank you."),  # one sentence
        ("See you then. See you then, okay?", "See you then. See you then, okay?"),  # not word for word
        ("Two words", "Two words"),
        ("", ""),
    ],
)
def test_a_sentence_written_twice_in_a_row_is_kept_once(text: str, kept: str) -> None:
    assert drop_repeated_sentences(text) == kept


def _unheard(r: DecodeResult, speech_s: float = 2.0) -> bool:
    from plugins.whisper.guard import unintelligible

    return unintelligible(r, clean_text(r, speech_s=speech_s), speech_s=speech_s)


def test_words_the_guard_emptied_are_a_caller_not_understood() -> None:
    assert _unheard(result((" Kay dum dum dirt ban nah", 0.1, -1.9, 1.2)))  # barely believed
    # a loop over more speech than its word said a few times: the caller said more than Whisper wrote
    assert _unheard(result((" the the the the the the the the the the", 0.2, -0.4, 1.8)))
    # not: words kept, too little speech, what Whisper took for no speech, its inventions for noise
    assert not _unheard(result((" Can I book a cleaning?", 0.02, -0.2, 1.1)))
    assert not _unheard(result((" Kay dum dum dirt ban nah", 0.1, -1.9, 1.2)), speech_s=0.6)
    assert not _unheard(result((" Kay dum dum dirt ban nah", 0.95, -1.9, 1.2)))
    assert not _unheard(result((" Thanks for watching!", 0.3, -0.3, 1.0)))
    assert not _unheard(result(("", 0.1, -1.9, 1.0)))


@pytest.mark.parametrize(
    "text",
    [
        "I'm going to play with the game, and I'm going to play with the game.",
        "I am too far away from the end of the game, but I am too far away from the end of the game",
        "I'm going to play a game, and I'm going to play a game, and I'm going to play a game, and I'm",
        "Can you hear me? Can you hear me?",
    ],
)
def test_one_clause_written_twice_is_dropped_unless_whisper_believes_it(text: str) -> None:
    """Decodes tiny.en wrote for Korean speech (the first three): a clause, then the same again."""
    unsure = result((f" {text}", 0.25, -1.3, 1.4))
    assert clean_text(unsure, speech_s=3.4) == ""
    assert _unheard(unsure, speech_s=3.4)  # the caller is asked to repeat, not answered
    assert clean_text(result((f" {text}", 0.05, -0.3, 1.4)), speech_s=3.4) != ""  # said, and heard well


@pytest.mark.parametrize(
    "text",
    [
        "I want to book, I want to book an appointment for Tuesday.",  # said more than the clause
        "Wait, wait.",  # too short to judge by this rule
        "It is on Monday. It is on Monday at nine.",
        "Could you check my order, could you check the other order too?",
    ],
)
def test_a_clause_said_again_with_more_is_not_an_echo(text: str) -> None:
    assert clean_text(result((f" {text}", 0.1, -1.3, 1.4)), speech_s=3.4) == text


def test_words_whisper_doubts_twice_over_are_dropped() -> None:
    """Unsure of the words and not quite sure it heard speech: tiny.en's English for Korean speech."""
    invented = result((" I'm going to be on the outside of your...", 0.2, -1.36, 1.1))
    assert clean_text(invented, speech_s=2.5) == ""
    assert _unheard(invented, speech_s=2.5)  # asked to repeat, not answered
    # either doubt alone keeps the words: a bad line read badly, a quiet caller read well
    assert clean_text(result((" The postcode is two five seven.", 0.03, -1.1, 1.1)), speech_s=2.5) != ""
    assert clean_text(result((" The postcode is two five seven.", 0.2, -0.4, 1.1)), speech_s=2.5) != ""
