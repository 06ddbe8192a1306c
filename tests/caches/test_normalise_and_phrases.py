from __future__ import annotations

import pytest

from caches import KINDS, PhraseSetError, load_phrases, normalise_text


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Sure.", "sure"),
        ("  Let   me see. ", "let me see"),
        ("I’m here", "I'm here"),
        ("Okay , so.", "okay, so"),
        ("ＯＫＡＹ", "okay"),
        ("네.", "네"),
    ],
)
def test_equivalent_texts_normalise_alike(a: str, b: str) -> None:
    assert normalise_text(a) == normalise_text(b)


@pytest.mark.parametrize(("a", "b"), [("Okay?", "Okay."), ("Right!", "Right?"), ("Sure", "Sure thing")])
def test_texts_spoken_differently_stay_different(a: str, b: str) -> None:
    assert normalise_text(a) != normalise_text(b)


def test_normalise_is_idempotent() -> None:
    for text in ["Hmm, let me think.", "  “Hi” …  ", "안녕하세요!  무엇을 도와드릴까요?"]:
        once = normalise_text(text)
        assert normalise_text(once) == once


def test_default_phrase_set_covers_every_kind_in_both_languages() -> None:
    ps = load_phrases()
    assert set(ps.languages) >= {"en", "ko"}
    for lang in ("en", "ko"):
        phrases = ps.for_voice("tara", lang)
        assert {p.kind for p in phrases} == set(KINDS)
        texts = [p.text for p in phrases]
        assert len(texts) == len(set(texts))
        acks = [p for p in phrases if p.kind == "acknowledgement"]
        assert len(acks) >= 5, "fillers need variety"
        assert all(len(p.text) <= 24 for p in acks), "fillers must be short"


def test_worker_lines_are_in_the_phrase_set() -> None:
    """The agent's greeting and apology are cache hits (exact lines from worker/agent.py)."""
    from worker.agent import APOLOGY, GREETING

    ps = load_phrases()
    for lang in ("en", "ko"):
        texts = {normalise_text(p.text) for p in ps.for_voice("tara", lang)}
        assert normalise_text(GREETING[lang]) in texts
        assert normalise_text(APOLOGY[lang]) in texts


def test_voice_override_replaces_a_kind(tmp_path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "languages:\n  en:\n    greeting: [Hello.]\n    acknowledgement: [Okay.]\n"
        'voices:\n  leo:\n    en:\n      greeting: ["Hey there, this is Leo."]\n'
    )
    ps = load_phrases(f)
    assert [p.text for p in ps.for_voice("tara", "en") if p.kind == "greeting"] == ["Hello."]
    assert [p.text for p in ps.for_voice("leo", "en") if p.kind == "greeting"] == ["Hey there, this is Leo."]
    assert [p.text for p in ps.for_voice("leo", "en") if p.kind == "acknowledgement"] == ["Okay."]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[1, 2", "not valid YAML"),
        ("foo: 1", "'languages'"),
        ("languages:\n  en:\n    chitchat: [Hi]", "unknown kind 'chitchat'"),
        ("languages:\n  en:\n    greeting: Hi", "list of non-empty strings"),
        ("languages:\n  en:\n    greeting: ['  ']", "list of non-empty strings"),
    ],
)
def test_bad_phrase_files_give_one_line_errors(tmp_path, body: str, needle: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(body)
    with pytest.raises(PhraseSetError) as e:
        load_phrases(f)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file_and_unknown_language(tmp_path) -> None:
    with pytest.raises(PhraseSetError, match="cannot read"):
        load_phrases(tmp_path / "nope.yaml")
    with pytest.raises(PhraseSetError, match="no phrases for language 'fr'"):
        load_phrases().for_voice("tara", "fr")
