import pytest

from turn_detection.text_cues import detect_language, text_cue, trailing_digits


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
        "I want to move it to the...",
        "Um, let me think.",
        "Hold on a second.",
        "Well,",
        "Could you put me through to the",
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
        # ordinary finished replies that the old word lists scored as unfinished (issue 16)
        "Yes, I do.",
        "See you then.",
        "Great, that helps a lot.",
        "Whatever you like.",
        "I've been waiting for a while.",
        "Mm-hmm.",
        "Okay, great, see you.",
        "It costs $25.",
        "Around 9:30.",
    ],
)
def test_finished_english_reads_complete(text: str) -> None:
    assert text_cue(text, "en").completeness >= 0.75


def test_questions_may_strand_a_preposition() -> None:
    assert text_cue("Who am I speaking with?").completeness >= 0.7
    assert text_cue("Who am I speaking with").completeness < 0.5
    assert text_cue("Is it possible to?").completeness < 0.5  # no wh-word: cut before its verb


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("My number is 555,", "digit_group"),
        ("My number is five five five two one four.", "digit_group"),
        ("It's spelled K-O-W.", "spelled_letters"),
        ("It's spelled K, O, W.", "spelled_letters"),
        ("I need milk, eggs, bread.", "open_list"),
    ],
)
def test_sequences_read_out_in_chunks_are_flagged(text: str, reason: str) -> None:
    cue = text_cue(text, "en")
    assert cue.reason == reason and cue.sequence
    assert not text_cue("I need milk, eggs, and bread.").sequence
    assert not text_cue("Plan B.").sequence


@pytest.mark.parametrize(
    "text", ["We are a group of 6.", "Can we make it Monday at 3?", "The meeting starts at 11."]
)
def test_one_short_number_closed_by_the_recogniser_is_an_answer(text: str) -> None:
    cue = text_cue(text, "en")
    assert not cue.sequence and cue.completeness >= 0.75


def test_a_short_number_left_open_may_be_a_group() -> None:
    assert text_cue("The gate code is 42", "en").sequence
    assert text_cue("It's 4 2.", "en").sequence  # two numbers in a row
    assert text_cue("It's extension 3 and 9.", "en").sequence
    assert not text_cue("It's extension 73.", "en").sequence
    assert not text_cue("Can we do 2-3 pm?", "en").sequence


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("My number is 555-214. 8 8 3 9", 10),  # how tiny.en writes a phone number read in groups
        ("It's 555 214 8839.", 10),
        ("five five five, one two three four", 7),
        ("call me on double eight 5 1234", 7),
    ],
)
def test_digits_read_in_a_row_are_counted_and_stay_a_sequence_in_english(text: str, digits: int) -> None:
    """English lists no finished-number lengths (issue 65: the list held the test split's digit counts):
    the text model's score sets the hold after a digit group."""
    assert trailing_digits(text.split()) == digits
    assert text_cue(text, "en").reason == "digit_group"


def test_a_korean_mobile_number_read_to_its_full_length_ends_the_sequence() -> None:
    cue = text_cue("제 번호는 010 1234 5678")
    assert cue.reason == "whole_number" and not cue.sequence and cue.completeness >= 0.75


@pytest.mark.parametrize(
    "text",
    ["My number is 555-214,", "The card is 4111 1111 1111", "The code is 12 345", "제 번호는 010 1234"],
)
def test_a_number_short_of_any_full_length_may_go_on(text: str) -> None:
    assert text_cue(text).reason == "digit_group"


@pytest.mark.parametrize(
    ("text", "completeness"),
    [
        ("We are a group of 20.", 0.78),
        ("It was about three.", 0.78),
        ("The meeting starts at 10:30.", 0.78),
        ("It costs under $20.", 0.78),
        ("My son is 15.", 0.78),
        ("Can we make it at 3?", 0.92),
    ],
)
def test_one_number_closing_a_sentence_reads_as_the_sentence(text: str, completeness: float) -> None:
    # its own reason only so the endpoint policy does not ask the language model (it reads numbers as open)
    cue = text_cue(text)
    assert (cue.reason, cue.completeness, cue.sequence) == ("closing_number", completeness, False)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The username is M. Oh.", "closed_sentence"),  # "Oh" after a spelled letter: a spelling
        ("I'm gonna name Novak N-4-V-A-K.", "closed_sentence"),  # letters and a digit: not a number
        ("My card number is 3553.", "digit_group"),  # a chunk of digits: the sequence may go on
        ("The best time is 5 6.", "digit_group"),  # numbers in a row
        ("It was about three,", "trailing_pause_mark"),  # the recogniser heard it go on
        ("Twenty.", "closed_sentence"),  # a number alone is a short answer, not a closing number
        ("Okay, my last four.", "closed_sentence"),  # a number after an adjective waits for its noun
    ],
)
def test_a_number_that_is_not_one_closing_a_sentence_keeps_its_reading(text: str, reason: str) -> None:
    assert text_cue(text).reason == reason


def test_question_beats_statement_and_statement_beats_fragment() -> None:
    q = text_cue("Is it open on Sunday?").completeness
    s = text_cue("It is open on Sunday.").completeness
    f = text_cue("It is open on").completeness
    assert q > s > f


@pytest.mark.parametrize(
    "text", ["예약하고 싶은데", "내일 오후에", "음", "제 계좌 번호는", "그리고 나서,", "잠깐만요.", "그리고"]
)
def test_unfinished_korean_reads_incomplete(text: str) -> None:
    assert text_cue(text).completeness <= 0.2


@pytest.mark.parametrize("text", ["내일 세시에 가능해요?", "예약을 취소하고 싶습니다.", "네", "감사합니다"])
def test_finished_korean_reads_complete(text: str) -> None:
    assert text_cue(text).completeness >= 0.75


def test_language_detection_and_empty_text() -> None:
    assert detect_language("네 알겠습니다") == "ko"
    assert detect_language("okay") == "en"
    assert text_cue("   ").reason == "empty"
