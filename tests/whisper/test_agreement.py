"""Local agreement on scripted hypotheses: what is confirmed, what stays tentative, what is committed."""

from __future__ import annotations

import random

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


def test_a_rewrite_of_confirmed_words_shows_the_newest_decode_word_for_word() -> None:
    la = LocalAgreement()
    la.update("I want to")
    la.update("I want to")
    out = la.update("I wanna go to the store")
    # not "I want to to the store": the newest decode wins, confirmed shrinks to what it still agrees with
    assert out.text == "I wanna go to the store"
    assert out.confirmed == "I"
    la.update("I need to update the shipping")
    out = la.update("I need to up date the shipping address")
    assert out.text == "I need to up date the shipping address"
    assert out.confirmed == "I need to"
    out = la.update("I need to up date the shipping address on")
    assert out.confirmed == "I need to up date the shipping address"


def _revise(words: list[str], rng: random.Random) -> list[str]:
    """A plausible next decode: extend, rewrite a word, merge/split words, or drop the tail."""
    out = list(words)
    op = rng.random()
    vocab = ["I", "want", "wanna", "to", "go", "the", "store", "3", "30", "3.30", "at", "Tuesday,", "tuesday"]
    if op < 0.4 or not out:
        out += rng.choices(vocab, k=rng.randint(1, 3))
    elif op < 0.6:
        out[rng.randrange(len(out))] = rng.choice(vocab)
    elif op < 0.75 and len(out) > 1:
        i = rng.randrange(len(out) - 1)
        out[i : i + 2] = [out[i] + out[i + 1]]
    elif op < 0.9:
        i = rng.randrange(len(out))
        out[i : i + 1] = [out[i], rng.choice(vocab)]
    else:
        out = out[: rng.randrange(len(out) + 1)]
    return out


def test_interims_never_duplicate_or_drop_a_word_over_random_revisions() -> None:
    """Property: every interim is the newest hypothesis word for word; the confirmed part is a prefix of it;
    words become confirmed only when two consecutive hypotheses agree on them."""
    for seed in range(300):
        rng = random.Random(seed)
        la = LocalAgreement()
        words: list[str] = []
        previous: list[str] | None = None
        for _ in range(rng.randint(1, 25)):
            words = _revise(words, rng)
            before = la.confirmed_words
            out = la.update(" ".join(words))
            assert out.text.split() == words, (seed, words, out)
            confirmed = out.confirmed.split()
            assert confirmed == words[: len(confirmed)]
            if len(confirmed) > len(before):
                assert previous is not None
                assert common_prefix_len(previous, words) >= len(confirmed)
            previous = words


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


def test_words_after_finds_the_new_words_of_a_turn_decoded_whole() -> None:
    from plugins.whisper.agreement import words_after

    assert words_after("I bought it from.", "I bought it from your shop.") == "your shop."
    assert words_after("Could you put me through to", "could you put me through to someone?") == "someone?"
    # the first part's last word heard differently this time: still cut after it
    assert words_after("The best day is up.", "The best day is, uh, next week.") == "next week."
    assert words_after("", "Hello there.") == "Hello there."
    assert words_after("My card number is 3553.", "My card number is 3553.") == ""
    # too little of the first part found: no guess
    assert words_after("Kill you, Ken.", "Could you check my last payment?") is None


def test_words_after_gives_up_rather_than_drop_words_on_a_weak_match() -> None:
    from plugins.whisper.agreement import words_after

    # one of two words found: cutting after it could drop the new words, so no answer
    assert words_after("Sentence 1.", "Something else entirely. Sentence 2.") is None
