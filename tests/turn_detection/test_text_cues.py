import pytest

from turn_detection.text_cues import detect_language, text_cue


@pytest.mark.parametrize(
    "text",
    [
        "I'd like to book a table for.",
        "I'd like to book a table for",
        "My account number is",
        "Please send the invoice to,",
        "I was thinking and",
        "so I called because",
        "um",
        "The thing is, uh",
        "Can you check whether my package",
        "I want to move it to the...",
    ],
)
def test_unfinished_english_reads_incomplete(text: str) -> None:
    assert text_cue(text, "en").completeness <= 0.2


@pytest.mark.parametrize(
    "text",
    [
        "What are your opening hours on Sunday?",
        "Please cancel my subscription.",
        "Yes, that works for me.",
        "I think so.",
        "Yes",
        "Where?",
    ],
)
def test_finished_english_reads_complete(text: str) -> None:
    assert text_cue(text, "en").completeness >= 0.8


def test_question_beats_statement_and_statement_beats_fragment() -> None:
    q = text_cue("Is it open on Sunday?").completeness
    s = text_cue("It is open on Sunday.").completeness
    f = text_cue("It is open on").completeness
    assert q > s > f


@pytest.mark.parametrize("text", ["예약하고 싶은데", "내일 오후에", "음", "제 계좌 번호는", "그리고 나서,"])
def test_unfinished_korean_reads_incomplete(text: str) -> None:
    assert text_cue(text).completeness <= 0.2


@pytest.mark.parametrize("text", ["내일 세시에 가능해요?", "예약을 취소하고 싶습니다.", "네", "감사합니다"])
def test_finished_korean_reads_complete(text: str) -> None:
    assert text_cue(text).completeness >= 0.75


def test_language_detection_and_empty_text() -> None:
    assert detect_language("네 알겠습니다") == "ko"
    assert detect_language("okay") == "en"
    assert text_cue("   ").reason == "empty"
