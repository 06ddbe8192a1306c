"""benchmarks.pronunciation: what counts as a term heard, gained or lost, a bad corpus in one line, and two
sentences spoken by the real hibari voice and heard by the real tiny.en."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.pronunciation import Sentence, main, paired, score

S = [
    Sentence("dental", "Ask Doctor Nguyen.", ("Nguyen",)),
    Sentence("dental", "Doctor Okonkwo on Harrowgate Road.", ("Okonkwo", "Harrowgate Road")),
]


def test_terms_heard_and_the_pairs_gained_and_lost() -> None:
    written = list(zip(S, ["Ask Doctor when.", "Doctor Okonkwo on Harrowgate Road."], strict=True))
    respelled = list(zip(S, ["Ask Doctor Nguyen.", "Doctor a conquer on Harrowgate Road."], strict=True))
    assert score(written)["terms_heard"] == 2 and score(respelled)["terms_heard"] == 2
    assert score(written)["terms_said"] == 3
    assert paired(written, respelled) == {"gained": ["Nguyen"], "lost": ["Okonkwo"]}


def corpus(folder: Path, pronunciations: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    labels = {
        "domains": {
            "dental": {
                "vocabulary": ["Nguyen", "Okonkwo", "Harrowgate Road"],
                "pronunciations": pronunciations,
            }
        },
        "sentences": [{"domain": s.domain, "text": s.text, "terms": list(s.terms)} for s in S],
    }
    (folder / "labels.json").write_text(json.dumps(labels))
    return folder


def test_a_bad_corpus_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(tmp_path / "none")]) == 1
    assert "make_pronunciation_corpus.py" in capsys.readouterr().err
    bad = corpus(tmp_path / "bad", {"Nguyen": "<laugh>"})
    assert main(["--data", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "not a pronunciation corpus" in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_small_corpus_is_spoken_and_heard_with_and_without_the_list(tmp_path: Path) -> None:
    data = corpus(tmp_path / "c", {"Nguyen": "win", "Okonkwo": "oh-KONK-woh"})
    out = tmp_path / "r.json"
    argv = [
        "--data",
        str(data),
        "--voices",
        "heart",
        "--listener",
        "tiny.en",
        "--transcripts",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    r = json.loads(out.read_text())
    for config in ("written", "respelled"):
        assert r[config]["terms_said"] == 3 and r[config]["synth_ms"]["p50"] > 0
        assert set(r[config]["by_voice"]) == {"heart"}
    assert {"gained", "lost"} <= set(r["paired"]["heart"])
    heard = r["transcripts"]["heart/respelled"]
    assert len(heard) == 2 and all(h.strip() for h in heard)
    assert "Harrowgate" in " ".join(heard)  # a term with no respelling is read as written either way
