"""Local agreement on scripted hypotheses: what is confirmed, what stays tentative, what is committed."""

from __future__ import annotations

from plugins.whisper.agreement import LocalAgreement, common_prefix_len, find_sentence_commit
from plugins.whisper.model import Segment


def seg(text: str, start: float, end: float) -> Segment:
    return Segment(text, start, end, no_speech_prob=0.01, avg_logprob=-0.1, compression_ratio=1.0)


def test_first_hypothesis_is_all_tentative() -> None:
    la = LocalAgreement()
    out = la.update("Can you help")
    assert out.confirmed == ""
    assert out.tentative == "Can you help"
    assert out.text == "Can you help"


def test_words_two_hypotheses_agree_on_are_confirmed() -> None:
    la = LocalAgreement()
    la.update("Can you help me")
    out = la.update("Can you help me reset the")
    assert out.confirmed == "Can you help me"
    assert out.tentative == "reset the"


def test_agreement_ignores_case_and_punctuation() -> None:
    la = LocalAgreement()
    la.update("Schedule a call with Sarah.")
    out = la.update("Schedule a call with Sarah Miller next")
    assert out.confirmed == "Schedule a call with Sarah"
    assert out.tentative == "Miller next"


def test_cut_last_word_is_not_confirmed() -> None:
    la = LocalAgreement()
    la.update("next Tues")
    out = la.update("next Tuesday at")
    assert out.confirmed == "next"
    assert out.tentative == "Tuesday at"


def test_confirmed_words_are_never_taken_back() -> None:
    la = LocalAgreement()
    la.update("I need to update the")
    la.update("I need to update the shipping")
    out = la.update("I need to up date the shipping address")
    assert out.confirmed == "I need to update the"
    # the rewritten hypothesis is shown after the confirmed words, aligned by position
    assert out.tentative == "the shipping address"
    out = la.update("I need to update the shipping address on")
    assert out.confirmed == "I need to update the"
    out = la.update("I need to update the shipping address on my")
    assert out.confirmed == "I need to update the shipping address on"


def test_confirmation_grows_monotonically_over_a_scripted_utterance() -> None:
    hyps = [
        "Take",
        "Take the second",
        "Take the second exit and",
        "Take the second exit and drive north",
        "Take the second exit and drive north for about 4 miles.",
    ]
    la = LocalAgreement()
    confirmed = [la.update(h).confirmed for h in hyps]
    assert confirmed == [
        "",
        "Take",
        "Take the second",
        "Take the second exit and",
        "Take the second exit and drive north",
    ]


def test_drop_prefix_and_reset() -> None:
    la = LocalAgreement()
    la.update("Hello there. How are")
    la.update("Hello there. How are you")
    la.drop_prefix(2)
    assert la.confirmed_words == ["How", "are"]
    out = la.update("How are you doing")
    assert out.confirmed == "How are you"
    la.reset()
    assert la.confirmed_words == []
    assert la.update("anything").confirmed == ""


def test_common_prefix_len() -> None:
    assert common_prefix_len(["a", "b", "c"], ["A", "b,", "d"]) == 2
    assert common_prefix_len([], ["a"]) == 0


def test_sentence_commit_takes_whole_confirmed_sentences_only() -> None:
    segments = [
        seg(" I want to book a table.", 0.0, 2.0),
        seg(" For four people.", 2.2, 4.0),
        seg(" At seven", 4.2, 6.0),
    ]
    confirmed = ["I", "want", "to", "book", "a", "table.", "For", "four", "people.", "At"]
    commit = find_sentence_commit(segments, confirmed, audio_s=6.0)
    assert commit is not None
    assert commit.text == "I want to book a table. For four people."
    assert commit.end_s == 4.0
    assert commit.n_words == 9


def test_sentence_commit_needs_confirmation_and_distance_from_the_end() -> None:
    segments = [seg(" I want to book a table.", 0.0, 2.0), seg(" For four", 2.2, 3.0)]
    # "table." not confirmed yet
    assert find_sentence_commit(segments, ["I", "want", "to", "book", "a"], audio_s=3.0) is None
    # confirmed, but the sentence ends within min_keep_s of the audio end
    words = ["I", "want", "to", "book", "a", "table.", "For"]
    assert find_sentence_commit(segments, words, audio_s=2.5) is None
    assert find_sentence_commit(segments, words, audio_s=3.5) is not None
    # one segment: never committed (its end is still moving)
    assert find_sentence_commit(segments[:1], words, audio_s=9.0) is None


def test_sentence_commit_skips_segments_without_sentence_end() -> None:
    segments = [seg(" so I was thinking", 0.0, 2.0), seg(" maybe", 2.0, 4.0)]
    assert find_sentence_commit(segments, ["so", "I", "was", "thinking", "maybe"], audio_s=9.0) is None
