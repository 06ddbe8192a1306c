"""benchmarks.stt --terms: what counts as a term heard or invented, a bad corpus in one line, and a small
corpus streamed through the real tiny.en with and without the business's vocabulary, then spoken by the real
hibari voice as written and respelled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from benchmarks.stt import TermFile, contains, main, score_terms
from tests.answer_audio import RATE, quiet, said

VOCAB = {"pharmacy": ("Lisinopril", "Okonkwo", "Harrowgate Road")}


def test_a_term_counts_only_as_whole_words_in_its_listed_spelling() -> None:
    assert contains("I need my lisinopril, please.", "Lisinopril")
    assert contains("I live on Harrowgate road.", "Harrowgate Road")
    assert not contains("I need my list in April.", "Lisinopril")
    assert not contains("Harrowgate Roads are long.", "Harrowgate Road")
    assert not contains("Okonkwos", "Okonkwo")


def test_recall_invented_terms_and_noise_are_counted_apart() -> None:
    files = [
        TermFile("a.wav", "pharmacy", "term", "A refill of my Lisinopril.", ("Lisinopril",), "piper"),
        TermFile(
            "b.wav", "pharmacy", "term", "Doctor Okonkwo on Harrowgate Road.", ("Okonkwo", "Harrowgate Road")
        ),
        TermFile("c.wav", "pharmacy", "plain", "Is my order ready?", ()),
        TermFile("d.wav", "pharmacy", "noise", "", ()),
    ]
    hyps = [
        "A refill of my list in April.",
        "Doctor Okonkwo on Harrowgate Road.",
        "Is my Okonkwo ready?",
        "Um.",
    ]
    r = score_terms(files, hyps, VOCAB)
    assert (r["terms_said"], r["terms_heard"]) == (3, 2)
    assert r["by_voice"] == {"piper": {"term_recall": 0.0, "terms_said": 1, "invented_terms": 0, "wer": 0.6}}
    assert r["invented_terms"] == 1  # "Okonkwo" where nobody said it
    assert (r["noise_transcripts"], r["noise_files"]) == (1, 1)
    assert r["wer"] > 0


def corpus(folder: Path, pronunciations: dict[str, str] | None = None) -> Path:
    """Two files of a pharmacy: a caller saying a listed term, and line noise."""
    text = "I need a refill of my Lisinopril."
    folder.mkdir(parents=True, exist_ok=True)
    sf.write(folder / "pharmacy_term_000.wav", np.concatenate([quiet(0.3), said(text), quiet(0.8)]), RATE)
    line_noise = np.random.default_rng(1).standard_normal(3 * RATE).astype(np.float32) * 0.003
    sf.write(folder / "pharmacy_noise_001.wav", line_noise, RATE)
    files = {
        "pharmacy_term_000.wav": {
            "domain": "pharmacy",
            "kind": "term",
            "text": text,
            "terms": ["Lisinopril"],
        },
        "pharmacy_noise_001.wav": {"domain": "pharmacy", "kind": "noise", "text": "", "terms": []},
    }
    labels = {"vocabulary": VOCAB, "pronunciations": {"pharmacy": pronunciations or {}}, "files": files}
    (folder / "labels.json").write_text(json.dumps(labels))
    return folder


@pytest.mark.slow
def test_a_small_corpus_through_the_real_recogniser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = corpus(tmp_path / "c")
    out = tmp_path / "report.json"
    assert main(["--terms", "--data", str(data), "--json", str(out), "--quiet", "--speed", "4"]) == 0
    report = json.loads(out.read_text())
    assert set(report["configs"]) == {"none", "listed"} and report["files_scored"] == 2
    for r in report["configs"].values():
        assert r["terms_said"] == 1 and r["noise_transcripts"] == 0 and r["invented_terms"] == 0
    by_file = {f["file"]: f for f in report["files"]}
    assert "Lisinopril" in by_file["pharmacy_term_000.wav"]["listed"]  # the listed spelling, as listed
    assert "term recall" in capsys.readouterr().out


@pytest.mark.slow
def test_the_corpus_sentences_spoken_as_written_and_respelled(tmp_path: Path) -> None:
    data = corpus(tmp_path / "c", {"Lisinopril": "ly-SIN-oh-pril"})
    out = tmp_path / "r.json"
    assert (
        main(["--terms", "--data", str(data), "--speak", "heart", "--model", "tiny.en", "--json", str(out)])
        == 0
    )
    r = json.loads(out.read_text())
    assert r["files_scored"] == 1  # the one sentence with a term, said by the one voice
    for config in ("written", "respelled"):
        c = r["configs"][config]
        assert c["terms_said"] == 1 and c["synth_ms"]["p50"] > 0 and set(c["by_voice"]) == {"heart"}
    heard = r["files"][0]
    assert heard["written"].strip() and heard["respelled"].strip()


def test_a_folder_that_is_not_a_vocabulary_corpus_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--terms", "--data", str(tmp_path)]) == 2
    assert "labels.json not found" in capsys.readouterr().err
    (tmp_path / "labels.json").write_text(json.dumps({"files": {}}))
    assert main(["--terms", "--data", str(tmp_path)]) == 2
    assert "not a vocabulary corpus" in capsys.readouterr().err
    (tmp_path / "labels.json").write_text(json.dumps({"vocabulary": VOCAB, "files": {}}))
    assert main(["--terms", "--data", str(tmp_path)]) == 2
    assert "no files" in capsys.readouterr().err
    files = {"a.wav": {"domain": "bakery", "kind": "plain", "text": "Hi.", "terms": []}}
    (tmp_path / "labels.json").write_text(json.dumps({"vocabulary": VOCAB, "files": files}))
    assert main(["--terms", "--data", str(tmp_path)]) == 2
    assert "'bakery', which has no vocabulary" in capsys.readouterr().err
    files = {"a.wav": {"domain": "pharmacy", "kind": "plain", "text": "Hi.", "terms": []}}
    (tmp_path / "labels.json").write_text(json.dumps({"vocabulary": VOCAB, "files": files}))
    assert main(["--terms", "--speak", "heart", "--data", str(tmp_path)]) == 2
    assert "no pronunciations" in capsys.readouterr().err
    labels = {"vocabulary": VOCAB, "pronunciations": {"pharmacy": {"Okonkwo": "<laugh>"}}, "files": {}}
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    assert main(["--terms", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a vocabulary corpus" in err and err.count("\n") == 1
