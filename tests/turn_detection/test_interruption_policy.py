import pytest

from turn_detection.interruption_policy import OverlapVerdict, classify_overlap


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
