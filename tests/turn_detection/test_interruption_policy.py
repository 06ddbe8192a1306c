import pytest

from turn_detection.interruption_policy import Overlap, OverlapVerdict, classify_overlap


@pytest.mark.parametrize(
    "text",
    [
        "mm-hmm",
        "Mm-hmm.",
        "yeah",
        "Yeah.",
        "okay",
        "OK.",
        "right",
        "Right.",
        "uh-huh",
        "Uh-huh.",
        "I see.",
        "Got it.",
        "Sounds good.",
        "yeah yeah",
        "Oh, okay.",
        "Right?",
        "M-M-M",  # hums as Whisper spells them in noise: matched by shape, not listed
        "Mmhmm.",
        "Ahh.",
        "Mmm-hmm.",
        "So, okay.",  # a discourse marker before a backchannel adds no content
        "And, uh-huh.",
        "Well, I see.",
        "네",
        "응",
        "네네",
        "예.",
        "그렇죠",
    ],
)
def test_backchannels_do_not_interrupt(text: str) -> None:
    assert classify_overlap(text) is OverlapVerdict.BACKCHANNEL


@pytest.mark.parametrize(
    "text",
    [
        "wait",
        "Wait.",
        "stop",
        "Stop!",
        "No, I said Tuesday.",
        "no",
        "Hold on.",
        "What time do you close?",
        "Actually I need two tickets.",
        "yeah but I wanted Monday",
        "okay wait",
        "Sorry?",
        "Can I pay by card?",
        "Ahh, stop.",
        "Mama.",
        "So.",  # a marker alone, or before content, is the caller starting to talk
        "And then the other one.",
        "So, yeah, and what about Friday",
        "잠깐만요",
        "아니요, 화요일이요",
        "그만",
        "내일은 몇 시에 열어요?",
    ],
)
def test_barge_ins_interrupt(text: str) -> None:
    assert classify_overlap(text) is OverlapVerdict.BARGE_IN


@pytest.mark.parametrize("text", ["", "  ", "...", "?!"])
def test_no_words_is_undecided(text: str) -> None:
    assert classify_overlap(text) is OverlapVerdict.EMPTY


def test_unknown_content_counts_as_barge_in() -> None:
    # a caller saying anything substantial over the agent takes the floor
    assert classify_overlap("the blue one") is OverlapVerdict.BARGE_IN
    assert classify_overlap("I") is OverlapVerdict.BARGE_IN


# A hum Whisper spelled as words: short and unsure. The texts are what tiny.en wrote for spoken "mm-hmm".
@pytest.mark.parametrize("text", ["Mama.", "in a month.", "and then them.", "Not it."])
def test_a_short_sound_the_recogniser_was_unsure_of_is_listening(text: str) -> None:
    assert classify_overlap(text) is OverlapVerdict.BARGE_IN  # the words alone
    hum = Overlap(speech_s=0.45, word_probability=0.4)
    assert classify_overlap(text, sound=hum) is OverlapVerdict.BACKCHANNEL


@pytest.mark.parametrize(
    ("text", "sound"),
    [
        ("Tuesday.", Overlap(speech_s=0.5, word_probability=0.95)),  # short but sure: an answer
        ("in a month", Overlap(speech_s=1.4, word_probability=0.4)),  # unsure but more than a breath
        ("Wait, wait.", Overlap(speech_s=0.6, word_probability=0.4)),  # a barge-in word, however unsure
        ("Can you hear me?", Overlap(speech_s=0.7, word_probability=0.4)),  # a question
        ("잠깐만요", Overlap(speech_s=0.5, word_probability=0.3)),
        ("Mama.", Overlap(speech_s=0.45, word_probability=None)),  # not known: the words decide
        ("Mama.", Overlap(speech_s=None, word_probability=0.3)),
    ],
)
def test_short_sounds_that_take_the_floor_still_stop_the_agent(text: str, sound: Overlap) -> None:
    assert classify_overlap(text, sound=sound) is OverlapVerdict.BARGE_IN
