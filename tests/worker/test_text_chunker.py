from plugins.text_chunker import ChunkerOptions, SpeechChunker, split_text


def stream(text: str, step: int = 3) -> list[str]:
    c = SpeechChunker()
    out: list[str] = []
    for i in range(0, len(text), step):
        out += c.push(text[i : i + step])
    return out + c.flush()


def test_first_piece_leaves_at_the_first_clause() -> None:
    pieces = stream("Okay, so let me check it, and then we can pick a time.")
    assert pieces[0] == "Okay, so let me check it,"
    assert pieces[1] == "and then we can pick a time."


def test_decimals_and_abbreviations_do_not_cut() -> None:
    pieces = stream("Sure, that works for me. Your slot is at 3.30 with Dr. Smith today. See you then!")
    assert pieces == [
        "Sure, that works for me.",
        "Your slot is at 3.30 with Dr. Smith today.",
        "See you then!",
    ]


def test_thousands_separator_is_not_a_clause() -> None:
    assert stream("That will be 1,250 dollars.") == ["That will be 1,250 dollars."]


def test_tags_stay_with_their_words() -> None:
    pieces = split_text("That is funny. <laugh> Anyway, what time works for you?")
    assert pieces[1].startswith("<laugh> Anyway")
    assert all(p != "<laugh>" for p in pieces)


def test_run_on_text_is_cut_at_max_words() -> None:
    words = " ".join(f"w{i}" for i in range(70))
    pieces = split_text(words, ChunkerOptions(max_words=30, first_max_words=30))
    assert len(pieces) == 3
    assert " ".join(pieces) == words


def test_nothing_speakable_gives_nothing() -> None:
    assert split_text("   ") == []
    assert split_text("<sigh>") == []


def test_nothing_is_lost_or_duplicated() -> None:
    text = "Hi there! I can help, of course. Which day, Monday or Tuesday? Great: see you at 10.15 then."
    assert " ".join(stream(text, step=1)) == text


def test_take_words_cuts_at_the_last_complete_word() -> None:
    c = SpeechChunker(ChunkerOptions(first_max_words=30))
    c.push("I can book that for you on Tues")
    assert c.take_words() == "I can book that for you on"
    assert c.push("day at ten. ") == ["Tuesday at ten."]


def test_take_words_keeps_too_little_and_unfinished_tags() -> None:
    c = SpeechChunker()
    c.push("Well")
    assert c.take_words() is None  # a word still being written
    c.push(" ok")
    assert c.take_words() is None  # one complete word is below the minimum
    c = SpeechChunker()
    c.push("That is funny <laugh> and")
    assert c.take_words() == "That is funny"  # the tag stays with the words after it
    assert c.flush() == ["<laugh> and"]
    c = SpeechChunker()
    c.push("That is <lau")
    assert c.take_words(min_words=2) == "That is"


def test_take_words_loses_nothing() -> None:
    text = "Let me check the calendar for the first open slot next week and get back to you"
    c = SpeechChunker()
    out: list[str] = []
    for i, word in enumerate(text.split(" ")):
        out += c.push(word + " ")
        if i % 4 == 3 and (taken := c.take_words()):
            out.append(taken)
    out += c.flush()
    assert " ".join(out).split() == text.split()


def test_a_short_first_sentence_joins_what_follows() -> None:
    """A one- or two-word opener is not sent alone: the caller's first audio should carry the answer."""
    chunker = SpeechChunker()
    assert chunker.push("Sure! ") == []
    assert chunker.push("Tuesday works fine, ") == ["Sure! Tuesday works fine,"]
    later = SpeechChunker()
    later.push("Right, that's four words. ")
    assert later.push("Ok. ") == ["Ok."]  # only the first piece waits
    assert split_text("Okay.") == ["Okay."]  # a reply that short is spoken whole


def test_a_first_piece_without_a_boundary_is_cut_short() -> None:
    """The first audio waits for the whole first piece to be synthesised: it never runs long."""
    pieces = stream("Great idea I will make sure to have a replacement ready for you on Thursday.")
    assert len(pieces[0].split()) == ChunkerOptions().first_max_words
    assert " ".join(pieces) == "Great idea I will make sure to have a replacement ready for you on Thursday."
