"""The pronunciation list: which words are respelled, the one-line errors of a bad list, the cache tag."""

from __future__ import annotations

import pytest

from plugins.pronunciation import (
    MAX_ENTRIES,
    PronunciationError,
    Pronunciations,
    check_pronunciations,
    format_pronunciations,
    merge_pronunciations,
    parse_pronunciations,
    read_alike,
    sound_distance,
    tag_of,
)

LIST = check_pronunciations(
    {
        "Nguyen": "win",
        "Okonkwo": "oh-konk-woh",
        "Pellingham Road": "pelling-um road",
        "Pellingham": "pelling-um",
        "IT": "eye tee",
    }
)


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Doctor Nguyen will see you.", "Doctor win will see you."),
        ("doctor NGUYEN, nguyen!", "doctor win, win!"),  # case does not matter for a name...
        ("It is the IT desk.", "It is the eye tee desk."),  # ...but a term in capitals matches only so
        ("Okonkwo's office", "oh-konk-woh's office"),  # a possessive keeps its ending
        ("Okonkwoville and Nguyenson", "Okonkwoville and Nguyenson"),  # whole words only
        ("We are on Pellingham\n Road, by Pellingham.", "We are on pelling-um road, by pelling-um."),
        ("Nothing listed here.", "Nothing listed here."),
    ],
)
def test_listed_words_are_respelled_whole(text: str, spoken: str) -> None:
    assert LIST.speak(text) == spoken


def test_capitals_mark_the_stress_for_people_and_reach_the_voice_in_lower_case() -> None:
    said = check_pronunciations({"Okonkwo": "oh-KONK-woh", "Nwachukwu": "nwah-CHOOK-woo", "ABC": "ABC"})
    assert said.speak("Okonkwo and Nwachukwu at ABC") == "oh-konk-woh and nwah-chook-woo at ABC"
    assert said.entries[0] == ("Okonkwo", "oh-KONK-woh")  # the list itself keeps the stress


def test_a_respelling_is_never_rewritten_by_another_entry() -> None:
    chain = check_pronunciations({"Szabo": "sah-bo", "bo": "boh"})
    assert chain.speak("Maria Szabo") == "Maria sah-bo"  # one pass: "bo" in the respelling is left alone


def test_an_empty_list_changes_nothing() -> None:
    assert not Pronunciations() and Pronunciations().speak("Doctor Nguyen") == "Doctor Nguyen"
    assert Pronunciations().tag("Doctor Nguyen") == ""


def test_tag_names_the_respelling_a_clip_was_made_with() -> None:
    text = "Doctor Nguyen will call you back."
    assert LIST.tag("Thanks for calling.") == ""  # no listed word: the clip is the same with any list
    assert LIST.tag(text).startswith("|say=")
    other = check_pronunciations({"Nguyen": "noo-yen"})
    assert other.tag(text) != LIST.tag(text)  # a changed respelling makes another clip
    assert tag_of("cpu/hibari|hibari==0.2.1" + LIST.tag(text)) == LIST.tag(text)
    assert tag_of("cpu/hibari|hibari==0.2.1") == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Nguyen", "is not 'word=how to say it'"),
        ("Nguyen=", "has no letters"),
        ("=win", "has no letters"),
        ("Nguyen=win; nguyen=noo-yen", "listed twice"),
        ("Nguyen=<laugh> win", "write plain words"),
        ("Nguyen=w\x00in", "control character"),
        ("N" * 41 + "=win", "over 40 characters"),
        ("Nguyen=" + "w" * 81, "over 80 characters"),
    ],
)
def test_a_bad_list_is_one_line(text: str, message: str) -> None:
    with pytest.raises(PronunciationError, match=message) as err:
        parse_pronunciations(text)
    assert "\n" not in str(err.value)


def test_too_many_entries_are_refused() -> None:
    with pytest.raises(PronunciationError, match=f"at most {MAX_ENTRIES}"):
        check_pronunciations({f"Name{i}": "nay-m" for i in range(MAX_ENTRIES + 1)})


def test_the_setting_form_reads_back_and_merges_with_the_file_winning() -> None:
    setting = parse_pronunciations(" Nguyen = win ;; Szabo=sah-boh ; ")
    assert setting.entries == (("Nguyen", "win"), ("Szabo", "sah-boh"))
    assert parse_pronunciations(format_pronunciations(setting)) == setting
    merged = merge_pronunciations(
        setting, check_pronunciations({"nguyen": "noo-yen", "Okonkwo": "oh-konk-woh"})
    )
    assert merged.speak("Nguyen, Szabo, Okonkwo") == "noo-yen, sah-boh, oh-konk-woh"


def test_sound_distance_ignores_stress_spaces_and_hyphens() -> None:
    assert (
        sound_distance("pˌɛɹiOdˈɑntɪst", "pˈɛɹ ˈi ˈO dˈɑn tˈɪst") == 0.0
    )  # one word, or syllable by syllable
    assert sound_distance("əŋˈIən", "wˈɪn") > 0.5  # hibari's "Nguyen" is not "win"
    assert sound_distance("", "") == 0.0


def test_read_alike_names_the_words_a_voice_already_says_as_respelled() -> None:
    readings = {"Nguyen": "əŋˈIən", "win": "wˈɪn", "periodontist": "pˌɛɹiOdˈɑntɪst"}
    readings["pair-ee-oh-don-tist"] = "pˈɛɹ ˈi ˈO dˈɑn tˈɪst"
    said = check_pronunciations({"Nguyen": "win", "periodontist": "pair-ee-oh-DON-tist"})
    assert read_alike(said, readings.__getitem__) == ["periodontist"]  # the voice gets the lower-case form
